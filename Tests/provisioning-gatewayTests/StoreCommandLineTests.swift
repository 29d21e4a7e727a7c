import AsyncHTTPClient
import Foundation
import GatewayStore
import GRDB
import GatewayTestSupport
import NIOCore
import NIOFoundationCompat
import ProvisioningCore
import Synchronization
import Testing

/// The store as ops meet it through the executable: CSV imports, an unreachable PostgreSQL, a crash.
@Suite struct StoreCommandLineTests {
    /// The sandbox config with its SQLite file in a fresh temporary directory.
    static func sandboxConfig() throws -> (config: URL, database: String) {
        let directory = TestDirectories.root.appendingPathComponent("cli-store-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let database = directory.appendingPathComponent("gateway.sqlite").path
        var yaml = try String(contentsOf: CommandLineTests.packageRoot.appendingPathComponent("Config/gateway.yaml"), encoding: .utf8)
            .replacingOccurrences(of: "anchors: [sandbox/", with: "anchors: [\(CommandLineTests.packageRoot.path)/Config/sandbox/")
        yaml += "\nstore:\n  sqlite:\n    path: \(database)\n"
        let config = directory.appendingPathComponent("gateway.yaml")
        try yaml.write(to: config, atomically: true, encoding: .utf8)
        return (config, database)
    }

    /// A card number given as an argument is refused without being repeated (the argument
    /// parser's error printed it back), and so is `--number` at all, once taken: every argument
    /// sits in `ps`, shell history and audit logs. The number goes on standard input.
    @Test func aCardNumberOnTheCommandLineIsRefusedUnrepeated() async throws {
        let (config, database) = try Self.sandboxConfig()
        try await SQLiteGatewayStore(path: database).migrate()
        let number = "4242424242424242"
        for arguments in [["vault", "put", "--config", config.path, "--card-id", "card_v", "--expiry", "11/49", "--name", "Jane", number],
                          ["vault", "put", "--config", config.path, "--card-id", "card_v", "--number", number, "--expiry", "11/49", "--name", "Jane"],
                          ["vault", "put", "--config", config.path, "--card-id", "card_v", "--number=\(number)", "--expiry", "11/49", "--name", "Jane"],
                          ["cards", "import", "--config", config.path, number],
                          // An option's value given after `=` is read too (the CLI audit: the
                          // parser's refusal echoed `--port=...` and `--batch-rows=...`).
                          ["serve", "--config", config.path, "--port=\(number)"],
                          ["cards", "import", "--config", config.path, "--batch-rows=\(number)", "cards.csv"],
                          ["cards", "import", "--config=\(number)", "cards.csv"]] {
            let run = try await CommandLineTests.run(arguments)
            #expect(run.status == 2, "\(run.stderr)")
            #expect(!(run.stdout + run.stderr).contains(number) && !(run.stdout + run.stderr).contains("42424242"), "\(run.stderr)")
            #expect(run.stderr.contains("standard input"), "\(run.stderr)")
        }
        // As `--card-id` (a legacy id, deleted by it) it is taken; on standard input too.
        let legacy = try await CommandLineTests.run(["cards", "delete", "--config", config.path, "--card-id", number])
        #expect(legacy.stderr.contains("nothing deleted") && !legacy.stderr.contains("holds a card number"), "\(legacy.stderr)")
        let put = try await CommandLineTests.run(["vault", "put", "--config", config.path, "--card-id", "card_v", "--expiry", "11/49", "--name", "Jane"],
                                                 standardInput: number + "\n")
        #expect(put.stderr.contains("not in the registry") && !put.stderr.contains("holds a card number"), "\(put.stderr)")
        // A standard input without a line break is read up to a bound, not until memory runs out.
        let endless = try await CommandLineTests.run(["vault", "put", "--config", config.path, "--card-id", "card_v", "--expiry", "11/49",
                                                      "--name", "Jane"], standardInput: String(repeating: "4", count: 4096))
        #expect(endless.status != 0 && endless.stderr.contains("standard input holds more than 1024 bytes"), "\(endless.stderr)")
        #expect(!endless.stderr.contains("4444"), "\(endless.stderr)")
    }

    /// Only `cards import` makes a store. A command that changes rows which must already be there,
    /// run where the store is not (a relative `store.sqlite.path` from another directory), fails
    /// saying where it looked and makes nothing: `vault rotate` had reported a clean rotation of a
    /// new, empty store, after which the runbook removes the old key.
    @Test func aCommandThatChangesRowsNeverMakesAStore() async throws {
        let (config, database) = try Self.sandboxConfig()
        for arguments in [["vault", "rotate"], ["vault", "delete", "--card-id", "card_v"], ["cards", "delete", "--card-id", "card_v"],
                          ["vault", "put", "--card-id", "card_v", "--expiry", "11/49", "--name", "Jane"]] {
            let run = try await CommandLineTests.run(Array(arguments.prefix(2)) + ["--config", config.path] + arguments.dropFirst(2),
                                                     standardInput: arguments[1] == "put" ? "4000000000000002\n" : nil)
            #expect(run.status == 2 && run.stderr.contains("no SQLite store at \(database)") && run.stderr.contains("nothing changed"),
                    "\(arguments): \(run.stdout)\(run.stderr)")
            #expect(!run.stdout.contains("re-sealed"), "\(run.stdout)")
            #expect(!FileManager.default.fileExists(atPath: database), "\(arguments) made a store")
        }
    }

    /// `cards import` reads its CSV whole: a device (`/dev/zero`) or a file past 256 MiB is
    /// refused before a byte is read, and nothing is imported (it had read until memory ran out).
    @Test func anImportFileThatIsNoRegularFileOrTooLargeIsRefusedUnread() async throws {
        let (config, database) = try Self.sandboxConfig()
        let device = try await CommandLineTests.run(["cards", "import", "--config", config.path, "/dev/zero"])
        #expect(device.status != 0 && device.stderr.contains("/dev/zero is not a file (a device or a directory)"), "\(device.stderr)")
        let large = config.deletingLastPathComponent().appendingPathComponent("large.csv")
        #expect(FileManager.default.createFile(atPath: large.path, contents: Data("card_id,program,issuer\n".utf8)))
        let handle = try FileHandle(forWritingTo: large)
        try handle.truncate(atOffset: UInt64((256 << 20) + 1))
        try handle.close()
        let tooLarge = try await CommandLineTests.run(["cards", "import", "--config", config.path, large.path])
        #expect(tooLarge.status != 0 && tooLarge.stderr.contains("is larger than cards import reads (at most 268435456 bytes, 256 MiB): split the file"),
                "\(tooLarge.stderr)")
        #expect(!FileManager.default.fileExists(atPath: database), "a refused import made a store")
    }

    /// A file that is there but is no gateway store (cut to nothing by a crash or a copy, another
    /// program's database, a FIFO) is refused by the commands that would migrate it, and `store
    /// check` says what it is without waiting on it; a file `cards import` refuses whole makes no
    /// store (the CLI audit: `vault rotate` had migrated such files and reported a clean rotation,
    /// and `store check` had waited for ever on a FIFO).
    @Test func aFileThatIsNoGatewayStoreIsRefusedNotMigrated() async throws {
        let (config, database) = try Self.sandboxConfig()
        let csv = config.deletingLastPathComponent().appendingPathComponent("bad.csv")
        try "card_id,program,issuer\nbad_1,demo,nope\n".write(to: csv, atomically: true, encoding: .utf8)
        let refusedImport = try await CommandLineTests.run(["cards", "import", "--config", config.path, csv.path])
        #expect(refusedImport.status == 2 && refusedImport.stderr.contains("nothing imported"), "\(refusedImport.stderr)")
        #expect(!FileManager.default.fileExists(atPath: database), "a refused import made a store")

        for make in ["empty", "other", "fifo"] {
            try? FileManager.default.removeItem(atPath: database)
            switch make {
            case "empty": FileManager.default.createFile(atPath: database, contents: Data())
            case "other": try await TestSQLite.queue(database).write { try $0.execute(sql: "CREATE TABLE notes (body TEXT)") }
            default: #expect(mkfifo(database, 0o600) == 0)
            }
            let rotate = try await CommandLineTests.run(["vault", "rotate", "--config", config.path])
            #expect(rotate.status == 2 && rotate.stderr.contains("nothing was changed") && !rotate.stdout.contains("re-sealed"),
                    "\(make): \(rotate.stdout)\(rotate.stderr)")
            let check = try await CommandLineTests.run(["store", "check", "--config", config.path])
            #expect(check.status == 2, "\(make): \(check.stdout)\(check.stderr)")
            if make == "other" {
                let tables = try await TestSQLite.queue(database).read { try String.fetchAll($0, sql: "SELECT name FROM sqlite_master WHERE type = 'table'") }
                #expect(tables == ["notes"], "the other program's database was changed: \(tables)")
            }
        }
    }

    /// An import that moves a card off the local issuer removes its vault entry and says so.
    @Test func anImportSaysWhichVaultEntriesItRemoved() async throws {
        let (config, database) = try Self.sandboxConfig()
        let csv = config.deletingLastPathComponent().appendingPathComponent("cards.csv")
        try "card_id,program,issuer\ncard_v,demo,local\n".write(to: csv, atomically: true, encoding: .utf8)
        #expect(try await CommandLineTests.run(["cards", "import", "--config", config.path, csv.path]).status == 0)
        let put = try await CommandLineTests.run(["vault", "put", "--config", config.path, "--card-id", "card_v", "--expiry", "11/49",
                                                  "--name", "Vault Test"], standardInput: "4000000000000002\n")
        #expect(put.status == 0, "\(put.stderr)")
        try "card_id,program,issuer,issuer_card_id\ncard_v,demo,tmp,tmp_v\n".write(to: csv, atomically: true, encoding: .utf8)
        let moved = try await CommandLineTests.run(["cards", "import", "--config", config.path, csv.path])
        #expect(moved.status == 0 && moved.stdout.contains("imported 1 card") && moved.stdout.contains("1 vault entry removed"), "\(moved.stdout)")
        #expect(try await SQLiteGatewayStore(path: database).vaultEntry("card_v") == nil)
    }

    @Test func cardsImportWritesAGoodFileAndRefusesABadOneWhole() async throws {
        let (config, database) = try Self.sandboxConfig()
        let directory = config.deletingLastPathComponent()
        let good = directory.appendingPathComponent("good.csv")
        try "card_id,program,issuer,customer_id,card_account_id,issuer_card_id\nmoved_1,demo,bridge,c1,a1,\nmoved_2,demo,tmp,,,t2\n"
            .write(to: good, atomically: true, encoding: .utf8)
        let imported = try await CommandLineTests.run(["cards", "import", "--config", config.path, good.path])
        #expect(imported.status == 0, "\(imported.stderr)")
        #expect(imported.stdout.contains("imported 2 cards"))
        #expect(try await CommandLineTests.run(["cards", "import", "--config", config.path, good.path]).status == 0)

        let bad = directory.appendingPathComponent("bad.csv")
        try "card_id,program,issuer,customer_id,card_account_id,issuer_card_id\nnew_1,demo,tmp,,,t\nnew_2,demo,bridge,c,,\nnew_3,demo,nope,,,\n"
            .write(to: bad, atomically: true, encoding: .utf8)
        let refused = try await CommandLineTests.run(["cards", "import", "--config", config.path, bad.path])
        #expect(refused.status != 0)
        #expect(refused.stderr.contains("line 3: issuer_reference.card_account_id: required for a bridge card"))
        #expect(refused.stderr.contains("line 4: issuer: unknown issuer 'nope'"))
        #expect(refused.stderr.contains("nothing imported"))

        // A file of many bad rows: every problem counted, the first hundred printed.
        let many = config.deletingLastPathComponent().appendingPathComponent("many-bad.csv")
        try ("card_id,program,issuer\n" + (1...250).map { "bad_\($0),demo,nope" }.joined(separator: "\n") + "\n")
            .write(to: many, atomically: true, encoding: .utf8)
        let flood = try await CommandLineTests.run(["cards", "import", "--config", config.path, many.path])
        #expect(flood.status == 2 && flood.stderr.contains("nothing imported: 250 problems"), "\(flood.stderr.prefix(300))")
        #expect(flood.stderr.contains("line 101:") && !flood.stderr.contains("line 102:") && flood.stderr.contains("... and 150 more"))

        let store = try await SQLiteGatewayStore.open(path: database)
        try await store.migrate()
        #expect(try await store.cards(CardPageQuery(limit: 10)).map(\.id) == ["moved_1", "moved_2"])
    }

    /// `store check` reads the whole file without migrating it: a missing file is named (not
    /// created), a sound one says so with its schema, and one with a damaged page lists what the
    /// check found and exits 2, where a request would find it only on reaching that page.
    @Test func storeCheckFindsDamageARequestWouldMeetOnlyLater() async throws {
        let (config, database) = try Self.sandboxConfig()
        let missing = try await CommandLineTests.run(["store", "check", "--config", config.path])
        #expect(missing.status == 2 && missing.stderr.contains("no SQLite store at \(database)"), "\(missing.stderr)")
        #expect(!FileManager.default.fileExists(atPath: database))

        let csv = config.deletingLastPathComponent().appendingPathComponent("many.csv")
        let rows = (0..<400).map { "checked_\($0),demo,bridge,cust_\($0),acct_\($0)," }.joined(separator: "\n")
        try ("card_id,program,issuer,customer_id,card_account_id,issuer_card_id\n" + rows + "\n").write(to: csv, atomically: true, encoding: .utf8)
        #expect(try await CommandLineTests.run(["cards", "import", "--config", config.path, csv.path]).status == 0)
        // The check changes nothing of the file: not its mode (the store's own opening would make
        // it 0600), not its bytes.
        try FileManager.default.setAttributes([.posixPermissions: 0o640], ofItemAtPath: database)
        let before = try Data(contentsOf: URL(fileURLWithPath: database))
        let sound = try await CommandLineTests.run(["store", "check", "--config", config.path])
        #expect(sound.status == 0, "\(sound.stderr)")
        #expect(sound.stdout.contains("no damage found, schema \(StoreBootstrap.currentSchema.last ?? "?")"), "\(sound.stdout)")
        #expect(try FileManager.default.attributesOfItem(atPath: database)[.posixPermissions] as? Int == 0o640)
        #expect(try Data(contentsOf: URL(fileURLWithPath: database)) == before)

        // Every byte of one page past the schema's overwritten: a torn page, say.
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: database))
        let size = try handle.seekToEnd()
        #expect(size > 8 * 4_096, "the cards span several pages")
        try handle.seek(toOffset: size / 2 / 4_096 * 4_096)
        try handle.write(contentsOf: Data(repeating: 0xA5, count: 4_096))
        try handle.close()
        let damaged = try await CommandLineTests.run(["store", "check", "--config", config.path])
        #expect(damaged.status == 2, "\(damaged.stdout)")
        #expect(damaged.stderr.contains("1 problem found") && damaged.stderr.contains("damaged"), "\(damaged.stderr)")
        #expect(!damaged.stderr.contains("cust_") && !damaged.stderr.contains("acct_"), "no row's values")
    }

    /// Sound pages are not yet a store: a file cut to nothing, another program's database and a
    /// store with a table of its schema gone each fail the check (they had read as "no damage
    /// found", the first two as never migrated).
    @Test func storeCheckRefusesWhatIsNotAWholeStore() async throws {
        let (config, database) = try Self.sandboxConfig()
        #expect(FileManager.default.createFile(atPath: database, contents: Data()))
        let empty = try await CommandLineTests.run(["store", "check", "--config", config.path])
        #expect(empty.status == 2 && empty.stderr.contains("holds no tables (0 bytes)"), "\(empty.stdout)\(empty.stderr)")

        try FileManager.default.removeItem(atPath: database)
        let foreign = try TestSQLite.queue(database)
        try await foreign.write { try $0.execute(sql: "CREATE TABLE x(a)") }
        try foreign.close()
        let other = try await CommandLineTests.run(["store", "check", "--config", config.path])
        #expect(other.status == 2 && other.stderr.contains("not the gateway's schema"), "\(other.stdout)\(other.stderr)")

        try FileManager.default.removeItem(atPath: database)
        try await SQLiteGatewayStore(path: database).migrate()
        let dropping = try TestSQLite.queue(database)
        try await dropping.write { try $0.execute(sql: "DROP TABLE released_issuer_references") }
        try dropping.close()
        let partial = try await CommandLineTests.run(["store", "check", "--config", config.path])
        #expect(partial.status == 2 && partial.stderr.contains("table released_issuer_references is missing"), "\(partial.stdout)\(partial.stderr)")
    }

    @Test func vaultPutSealsAndDeleteRemovesAndAWrongKeyIsAClearError() async throws {
        let (config, database) = try Self.sandboxConfig()
        try await SQLiteGatewayStore(path: database).migrate()
        // An entry belongs to a registered card.
        let unregistered = try await CommandLineTests.run(["vault", "put", "--config", config.path, "--card-id", "card_v",
                                                           "--expiry", "11/49", "--name", "Vault Test"], standardInput: "4000000000000002\n")
        #expect(unregistered.status == 2 && unregistered.stderr.contains("card card_v is not in the registry"))
        let csv = config.deletingLastPathComponent().appendingPathComponent("local.csv")
        try "card_id,program,issuer\ncard_v,demo,local\n".write(to: csv, atomically: true, encoding: .utf8)
        #expect(try await CommandLineTests.run(["cards", "import", "--config", config.path, csv.path]).status == 0)
        let put = try await CommandLineTests.run(["vault", "put", "--config", config.path, "--card-id", "card_v",
                                                  "--expiry", "11/49", "--name", "Vault Test"], standardInput: "4000000000000002\n")
        #expect(put.status == 0, "\(put.stderr)")
        #expect(put.stdout.contains("number ending 0002") && !put.stdout.contains("4000000000000002"))
        let store = try await SQLiteGatewayStore.open(path: database)
        let sealed = try #require(try await store.vaultEntry("card_v"))
        #expect(!String(decoding: sealed, as: UTF8.self).contains("4000000000000002"))

        // A card past its expiry month is refused, and so is a name with a control character.
        let expired = try await CommandLineTests.run(["vault", "put", "--config", config.path, "--card-id", "card_v",
                                                      "--expiry", "01/20", "--name", "Vault Test"], standardInput: "4000000000000002\n")
        #expect(expired.status == 2 && expired.stderr.contains("expiry: the card expired at the end of 01/20"), "\(expired.stderr)")
        #expect(!expired.stderr.contains("4000000000000002"))
        let badName = try await CommandLineTests.run(["vault", "put", "--config", config.path, "--card-id", "card_v",
                                                      "--expiry", "11/49", "--name", "Vault\u{1B}[2JTest"], standardInput: "4000000000000002\n")
        #expect(badName.status == 2 && badName.stderr.contains("name: 1 to 26 letters"), "\(badName.stderr)")
        #expect(try await store.vaultEntry("card_v") == sealed, "a refused put changed the entry")

        let badNumber = try await CommandLineTests.run(["vault", "put", "--config", config.path, "--card-id", "card_v",
                                                        "--expiry", "11/49", "--name", "X"], standardInput: "12ab\n")
        #expect(badNumber.status != 0 && badNumber.stderr.contains("number: 12 to 19 digits"))

        let deleted = try await CommandLineTests.run(["vault", "delete", "--config", config.path, "--card-id", "card_v"])
        #expect(deleted.status == 0 && deleted.stdout.contains("deleted"))
        #expect(try await store.vaultEntry("card_v") == nil)

        // Deleting the card from the CLI deletes its vault entry too; every action is a security event.
        #expect(try await CommandLineTests.run(["vault", "put", "--config", config.path, "--card-id", "card_v",
                                                "--expiry", "11/49", "--name", "Vault Test"], standardInput: "4000000000000002\n").status == 0)
        let rotated = try await CommandLineTests.run(["vault", "rotate", "--config", config.path])
        #expect(rotated.status == 0 && rotated.stdout.contains("already current 1"), "\(rotated.stdout)\(rotated.stderr)")
        let cardDeleted = try await CommandLineTests.run(["cards", "delete", "--config", config.path, "--card-id", "card_v"])
        #expect(cardDeleted.status == 0 && cardDeleted.stdout.contains("deleted card card_v"))
        #expect(try await store.vaultEntry("card_v") == nil)
        // Deleting what is not there (again, or a typo'd id) fails, so that a script notices, and
        // writes no security event.
        for command in ["cards", "vault"] {
            let again = try await CommandLineTests.run([command, "delete", "--config", config.path, "--card-id", "card_v"])
            #expect(again.status == 2 && again.stderr.contains("nothing deleted") && again.stdout.isEmpty, "\(again.stdout)\(again.stderr)")
        }
        let kinds = try await store.securityEvents(SecurityEventQuery(cardID: "card_v")).map(\.kind)
        #expect(kinds == [.vaultPut, .vaultDeleted, .vaultPut, .cardDeleted])
        let all = try await store.securityEvents(SecurityEventQuery())
        #expect(all.contains { $0.kind == .cardsImported && $0.detail["count"] == "1" })
        #expect(all.contains { $0.kind == .vaultRotated })
        #expect(all.allSatisfy { $0.actor.hasPrefix("cli:") })
    }

    /// A card registered before card numbers were refused as ids can still be deleted, and the
    /// number is neither printed nor audited.
    @Test func aCardWhoseIdIsACardNumberIsDeletedWithoutRepeatingIt() async throws {
        let (config, database) = try Self.sandboxConfig()
        let store = try await SQLiteGatewayStore.open(path: database)
        try await store.migrate()
        let number = "4111111111111111"
        _ = try await store.putCard(CardRecord(id: CardID(number), program: "demo", issuer: "tmp",
                                               issuerReference: .init(["issuer_card_id": "t_old"])), owners: nil, event: nil)
        // Its vault entry, which no listed key opens: `vault rotate` names it masked (it printed it).
        try await store.putVaultEntry(CardID(number), sealed: Data(repeating: 1, count: 64), event: nil)
        let rotated = try await CommandLineTests.run(["vault", "rotate", "--config", config.path])
        #expect(rotated.status == 2 && rotated.stderr.contains("no listed key opens"), "\(rotated.stdout)\(rotated.stderr)")
        #expect(!(rotated.stdout + rotated.stderr).contains(number), "\(rotated.stderr)")
        let deleted = try await CommandLineTests.run(["cards", "delete", "--config", config.path, "--card-id", number])
        #expect(deleted.status == 0 && deleted.stdout.contains("deleted card"), "\(deleted.stdout)\(deleted.stderr)")
        #expect(try await store.card(CardID(number)) == nil)
        let events = try await store.securityEvents(SecurityEventQuery())
        #expect(events.contains { $0.kind == .cardDeleted })
        #expect(!(deleted.stdout + deleted.stderr).contains(number) && !events.contains { $0.cardID?.rawValue.contains(number) == true })
    }

    @Test func anUnreachablePostgresStopsStartUpNamingTheStore() async throws {
        let file = try CommandLineTests.writeConfig("""
            store:
              postgres:
                url: postgres://gateway@127.0.0.1:1/gateway
                connect_timeout_ms: 500
            vault: { key: env:GATEWAY_TEST_VAULT_KEY }
            """)
        defer { try? FileManager.default.removeItem(at: file) }
        // Every secret is there: the store is what fails.
        let run = try await CommandLineTests.run(["--config", file.path, "--port", "0"],
                                                 environment: ["GATEWAY_TEST_VAULT_KEY": Data((0..<32).map { UInt8($0 + 7) }).base64EncodedString()])
        #expect(run.status != 0)
        #expect(run.stderr.contains("postgres 127.0.0.1:1/gateway"))
        #expect(!run.stderr.contains("Fatal error") && !run.stderr.contains("Stack dump"))
        #expect(!run.stdout.contains("listening on"))
    }

    @Test func aKilledGatewayLeavesADatabaseWithTheAuditOfEveryAnsweredRequest() async throws {
        let (config, database) = try Self.sandboxConfig()
        let body = try Data(contentsOf: CommandLineTests.packageRoot.appendingPathComponent("Config/sandbox/apple-pay-request.json"))
        let answered = AnsweredIDs()
        let cards = ["card_bridge_demo", "card_tmp_demo", "card_crossmint_demo"]

        let (_, status) = try await Command.withRunning(
            try CommandLineTests.executable().path, ["--config", config.path, "--port", "0", "--log-level", "warning"],
            workingDirectory: CommandLineTests.packageRoot.path
        ) { running in
            let base = try #require(running.firstLine.split(separator: " ").first { $0.hasPrefix("http://") }.map(String.init))
            await withTaskGroup(of: Void.self) { group in
                for worker in 0..<4 {
                    group.addTask {
                        for round in 0..<200 {
                            var request = HTTPClientRequest(url: "\(base)/v1/cards/\(cards[(worker + round) % 3])/wallet-provisioning/apple-pay")
                            request.method = .POST
                            request.headers.add(name: "Authorization", value: "Bearer sk_sandbox_demo")
                            request.headers.add(name: "Content-Type", value: "application/json")
                            request.body = .bytes(ByteBuffer(bytes: body))
                            // After the kill every call fails: the worker stops.
                            guard let response = try? await HTTPClient.shared.execute(request, timeout: .seconds(10)),
                                  let buffer = try? await response.body.collect(upTo: 1 << 20)
                            else { return }
                            guard response.status == .ok,
                                  let id = (try? JSONSerialization.jsonObject(with: Data(buffer: buffer)) as? [String: Any])?["provisioning_id"] as? String
                            else { continue }
                            let count = answered.ids.withLock { $0.append(id); return $0.count }
                            // Killed in the middle of the stream, with requests in flight.
                            if count == 60 { running.signal(SIGKILL) }
                        }
                    }
                }
            }
        }
        #expect(status == -SIGKILL)

        let ids = answered.ids.withLock { $0 }
        #expect(ids.count >= 60)
        let store = try await SQLiteGatewayStore.open(path: database)
        try await store.migrate()
        var missing: [String] = []
        for id in ids where try await store.auditEvents(ProvisioningID(id)).first?.outcome != .succeeded { missing.append(id) }
        #expect(missing.isEmpty, "answered but not audited: \(missing.count) of \(ids.count)")
    }
}

final class AnsweredIDs: Sendable {
    let ids = Mutex<[String]>([])
}
