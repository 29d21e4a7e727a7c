import Foundation
import Gateway
import GatewayStore
import Logging
import ProvisioningCore

/// What a one-shot operator command produced: lines for standard output, and a failure message
/// (the command exits non-zero) or nil. Card numbers never appear in either.
public struct ToolOutcome: Sendable, Equatable {
    public var output: [String]
    public var diagnostics: [String]
    public var failure: String?

    static func ok(_ lines: String...) -> ToolOutcome { ToolOutcome(output: lines, diagnostics: [], failure: nil) }
    static func failed(_ message: String, diagnostics: [String] = []) -> ToolOutcome {
        ToolOutcome(output: [], diagnostics: diagnostics, failure: message)
    }
}

/// The store and vault commands of the CLI (`cards import|delete`, `vault put|delete|rotate`),
/// behind the composition root: the executable parses arguments and prints, and imports no store,
/// vault or registry module itself. Every change writes its security event with `actor`.
public enum OperatorTools {
    /// Why the command line may not be run as given, or nil: an argument that is a card number
    /// (`InputRules.isCardNumber`: a file name with a long number in it is not), or `--number`,
    /// which `vault put` took until the CLI audit. Every argument sits in `ps`, shell history and
    /// the system's audit log, and a number pasted as a stray argument was printed back by the
    /// argument parser's error. `--card-id` may hold one: a card registered under a card number
    /// before ids were checked is deleted by it (and shown masked). The number is never repeated.
    public static func commandLineProblem(_ arguments: [String]) -> String? {
        for (index, argument) in arguments.enumerated() {
            if argument == "--number" || argument.hasPrefix("--number=") {
                return "--number is not taken (its value is not repeated): card numbers are never given as arguments, where ps, "
                    + "shell history and audit logs keep them; `vault put` reads the number from standard input"
            }
            let isCardID = argument.hasPrefix("--card-id=") || (index > 0 && arguments[index - 1] == "--card-id")
            // `--option=VALUE` is read for its value too: `--port=4111111111111111` had been
            // echoed by the parser's refusal (the CLI audit).
            let value = argument.hasPrefix("-") ? argument.split(separator: "=", maxSplits: 1).dropFirst().first.map(String.init) : nil
            if !isCardID, InputRules.isCardNumber(argument) || value.map(InputRules.isCardNumber) == true {
                return "argument \(index + 1) holds a card number (not repeated): card numbers are never given as arguments, where ps, "
                    + "shell history and audit logs keep them; `vault put` reads the number from standard input"
            }
        }
        return nil
    }

    /// Reads the config at `path`, opens and migrates its store, runs `body`; every failure is an
    /// outcome with a clear message, never a crash.
    /// `migrating: false` (a command that only reads, `route explain`) neither creates nor
    /// migrates a store: a SQLite path that names no file, or a schema other than this version's,
    /// is a failure saying so (a typo'd path had been created and migrated, and a newer binary
    /// run to look would have migrated production).
    /// `mayCreate: false` (every command but `cards import`: they change rows that must already be
    /// there) refuses a SQLite path that names no file, rather than making an empty store: `vault
    /// rotate` run from another directory had reported a clean rotation of an empty store, after
    /// which the runbook removes the old key (CLI audit).
    static func withStore(
        config path: String, environment: [String: String], migrating: Bool = true, mayCreate: Bool = false,
        _ body: @escaping @Sendable (GatewayConfig, any GatewayStore) async throws -> ToolOutcome
    ) async -> ToolOutcome {
        let config: GatewayConfig
        do {
            config = try ConfigLoader.load(path: path)
        } catch {
            return .failed("\(error)")
        }
        let sqlitePath = config.store.postgres == nil ? config.store.sqlite.path : nil
        let creating = sqlitePath.map { !FileManager.default.fileExists(atPath: $0) } ?? false
        if !migrating, creating, let sqlitePath {
            return .failed("no SQLite store at \(sqlitePath) (store.sqlite.path): nothing to read")
        }
        if !mayCreate, creating, let sqlitePath {
            let absolute = URL(fileURLWithPath: sqlitePath).standardizedFileURL.path
            return .failed("no SQLite store at \(absolute) (store.sqlite.path, read from the current directory "
                + "\(FileManager.default.currentDirectoryPath)): nothing changed; run this from the directory the gateway runs in, "
                + "or give store.sqlite.path as an absolute path")
        }
        // A file that is there must be a gateway's store before anything opens (and migrates) it:
        // a store cut to nothing by a crash or a copy, or another program's database, had been
        // migrated and reported clean by `vault rotate` ("unreadable 0"; the CLI audit).
        if !creating, let sqlitePath, let problem = SQLiteGatewayStore.notAGatewayStore(path: sqlitePath) {
            return .failed("sqlite \(sqlitePath): \(problem); nothing was changed")
        }
        do {
            var outcome: ToolOutcome = try await StoreBootstrap.withStore(config.store, baseDirectory: config.baseDirectory, environment: environment,
                                                             logger: Logger(label: "provisioning-gateway"), migrate: migrating) { opened in
                if !migrating {
                    let versions = try await opened.store.schemaVersions()
                    guard versions == StoreBootstrap.currentSchema else {
                        return .failed("\(opened.name): its schema (\(versions.last ?? "none")) is not this version's "
                            + "(\(StoreBootstrap.currentSchema.last ?? "")): start this version of the gateway to migrate it first; nothing was read")
                    }
                }
                return try await body(config, opened.store)
            }
            // A write to a store that was not there made a new, empty one: said, with where, since
            // a relative `store.sqlite.path` is read from the current directory, and an import run
            // from elsewhere had gone to a store no gateway reads (CLI audit M4).
            if creating, let sqlitePath {
                let absolute = URL(fileURLWithPath: sqlitePath).standardizedFileURL.path
                outcome.diagnostics.append("note: no store was at \(absolute) (store.sqlite.path, read from the current directory "
                    + "\(FileManager.default.currentDirectoryPath)): a new one was made there; if the gateway runs elsewhere, this is not its store")
            }
            return outcome
        } catch let error as GatewayError {
            return .failed(error.detail)
        } catch let error as ConfigError {
            return .failed("\(error)")
        } catch {
            return .failed("the store is not usable: \(error)")
        }
    }

    /// Cards per transaction of `cards import` unless told (`CardImport.defaultBatchRows`).
    public static let importBatchRows = CardImport.defaultBatchRows

    /// How many of a file's problems `cards import` prints (all are counted).
    static let maxProblemsShown = 100

    /// `cards import`: every row checked, then written in batches (`CardImport`).
    public static func importCards(
        config path: String, csv text: String, fileName: String, actor: String, batchRows: Int = CardImport.defaultBatchRows,
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) async -> ToolOutcome {
        // The file is read before any store is opened: a file refused whole had made and migrated
        // a store where none was, which the next command (`vault rotate`) then took for the
        // gateway's and reported clean (the CLI audit).
        let importer: CardImport
        do {
            importer = CardImport(registration: CardRegistration(config: try ConfigLoader.load(path: path)))
        } catch {
            return .failed("\(error)")
        }
        let cards: [CardRecord]
        switch importer.parse(text) {
        case .failure(let error): return rejected(error.problems, fileName: fileName)
        case .success(let parsed): cards = parsed
        }
        return await withStore(config: path, environment: environment, mayCreate: true) { _, store in
            let name = String(URL(fileURLWithPath: fileName).lastPathComponent.prefix(128))
            let result = try await importer.write(cards, into: store, batchRows: batchRows) { count in
                SecurityEvent(at: Date(), kind: .cardsImported, actor: actor, detail: ["count": "\(count)", "file": name])
            }
            switch result {
            case .imported(let count, let removed):
                // Removed vault entries are said: sealed card data is gone (the CLI audit saw 61 go unsaid).
                let vault = removed == 0 ? "" : "; \(removed) vault entr\(removed == 1 ? "y" : "ies") removed: \(removed == 1 ? "its card" : "their cards") "
                    + "moved to another program, issuer or reference (`vault put` again if the data still belongs to the card)"
                return .ok("imported \(count) card\(count == 1 ? "" : "s") from \(fileName)\(vault)")
            case .rejected(let problems):
                return rejected(problems, fileName: fileName)
            case .stopped(let imported, let total, let reason):
                return .failed("imported \(imported) of \(total) cards from \(fileName), then stopped: fix the file and run it again "
                               + "(cards already imported are written again unchanged)", diagnostics: ["\(fileName): \(reason)"])
            }
        }
    }

    /// The first problems, each with its line: a file of 400,000 bad rows had printed them all.
    private static func rejected(_ problems: [CardImport.Problem], fileName: String) -> ToolOutcome {
        let shown = problems.prefix(maxProblemsShown).map { "\(fileName): \($0)" }
        let more = problems.count > maxProblemsShown ? ["\(fileName): ... and \(problems.count - maxProblemsShown) more"] : []
        return .failed("nothing imported: \(problems.count) problem\(problems.count == 1 ? "" : "s") in \(fileName)", diagnostics: shown + more)
    }

    /// `store check`: the store read whole for damage, without migrating or changing it. A
    /// SQLite file that does not exist is named, not created.
    public static func checkStore(config path: String, environment: [String: String] = ProcessInfo.processInfo.environment) async -> ToolOutcome {
        let config: GatewayConfig
        do {
            config = try ConfigLoader.load(path: path)
        } catch {
            return .failed("\(error)")
        }
        @Sendable func outcome(_ name: String, versions: [String], problems: [String]) -> ToolOutcome {
            // A file a newer gateway migrated is not this version's to vouch for.
            if let newer = versions.first(where: { !StoreBootstrap.currentSchema.contains($0) }) {
                return .failed("\(name): schema \(newer) is from a newer gateway than this one; check it with that version")
            }
            guard problems.isEmpty else {
                return .failed("\(name): \(problems.count) problem\(problems.count == 1 ? "" : "s") found; "
                    + "restore the last backup, or copy out what still reads (sqlite3 .recover) and check again",
                               diagnostics: problems.map { "\(name): \($0)" })
            }
            let schema = versions.last.map { "schema \($0) (\(versions.count) versions)" } ?? "no schema yet (never migrated)"
            return .ok("\(name): no damage found, \(schema)")
        }
        do {
            guard config.store.postgres != nil else {
                let path = config.store.sqlite.path
                guard FileManager.default.fileExists(atPath: path) else {
                    return .failed("no SQLite store at \(path) (store.sqlite.path): nothing to check")
                }
                let (versions, problems) = try await SQLiteGatewayStore.checkFile(path: path)
                return outcome("sqlite \(path)", versions: versions, problems: problems)
            }
            return try await StoreBootstrap.withStore(config.store, baseDirectory: config.baseDirectory, environment: environment,
                                                      logger: Logger(label: "provisioning-gateway"), migrate: false) { opened in
                let problems = try await opened.store.check()
                let versions = problems.isEmpty ? try await opened.store.schemaVersions() : []
                return outcome(opened.name, versions: versions, problems: problems)
            }
        } catch {
            return .failed("the store is not usable: \(error)")
        }
    }

    /// `cards delete`: the card and its vault entry. A card id the registry does not hold is a
    /// failure (exit 2), as `rm` without `-f`: a typo'd id must not read as done in a script. It
    /// takes an id that holds a card number too (`hasCardIDShape`), to remove a card registered
    /// before ids were refused for it; such an id is shown and audited masked (`shown`).
    public static func deleteCard(
        config path: String, cardID id: String, actor: String, environment: [String: String] = ProcessInfo.processInfo.environment
    ) async -> ToolOutcome {
        guard InputRules.hasCardIDShape(id) else { return .failed(InputRules.cardIDRule) }
        return await withStore(config: path, environment: environment) { _, store in
            let deleted = try await store.deleteCard(
                CardID(id), owners: nil, event: SecurityEvent(at: Date(), kind: .cardDeleted, actor: actor, cardID: CardID(shown(id)))) != nil
            return deleted ? .ok("deleted card \(shown(id)) and its vault entry")
                : .failed("no card \(shown(id)) in the registry: nothing deleted (card ids are case-sensitive)")
        }
    }

    /// A card id as the CLI prints and audits it: as it is, or with its digit runs masked when
    /// it holds a card number.
    static func shown(_ id: String) -> String {
        InputRules.holdsCardNumber(id) ? InputRules.short(id) : id
    }

    /// The vault over the config's store and key ring.
    /// `sealing`: the command seals new entries, so the keys are first checked against the
    /// entries already sealed under their ids (`CardVault.keyProblem`).
    static func withVault(
        config path: String, environment: [String: String], sealing: Bool = false,
        _ body: @escaping @Sendable (CardVault, any GatewayStore) async throws -> ToolOutcome
    ) async -> ToolOutcome {
        await withStore(config: path, environment: environment) { config, store in
            let vault = CardVault(store: store, keyring: try VaultKeyring.resolve(config.vault, environment: environment))
            if sealing, let problem = try await vault.keyProblem() { return .failed(problem) }
            return try await body(vault, store)
        }
    }

    /// The registered card, or a clear failure: the vault holds data only for registry cards.
    static func registeredCard(_ id: String, in store: any GatewayStore) async throws -> CardRecord {
        guard InputRules.isCardID(id) else { throw GatewayError(.invalidRequest, InputRules.cardIDRule) }
        guard let card = try await store.card(CardID(id)) else {
            throw GatewayError(.cardNotFound, "card \(id) is not in the registry: register it first (PUT /v1/cards/\(id) or cards import)")
        }
        return card
    }

    /// `vault put`: seals a registered card's data under the active key.
    public static func putVaultEntry(
        config path: String, cardID id: String, number: String, expiry: String, name: String, actor: String,
        environment: [String: String] = ProcessInfo.processInfo.environment, now: Date = Date()
    ) async -> ToolOutcome {
        let data: CardData
        do {
            data = try CardData(number: number, name: name, expiry: expiry)
        } catch {
            return .failed(error.detail)
        }
        // A card past its expiry would be sealed and provisioned, and refused by the network later.
        if let expired = data.expiredProblem(at: now) { return .failed(expired) }
        return await withVault(config: path, environment: environment, sealing: true) { vault, store in
            let card = try await registeredCard(id, in: store)
            try await vault.put(card, data, event: SecurityEvent(
                at: Date(), kind: .vaultPut, actor: actor, cardID: card.id, detail: ["program": card.program.rawValue]))
            return .ok("sealed card data for \(id) (number ending \(data.number.suffix(4)))")
        }
    }

    /// `vault delete`; an id with no vault entry is a failure, as for `cards delete`.
    public static func deleteVaultEntry(
        config path: String, cardID id: String, actor: String, environment: [String: String] = ProcessInfo.processInfo.environment
    ) async -> ToolOutcome {
        guard InputRules.hasCardIDShape(id) else { return .failed(InputRules.cardIDRule) }
        return await withVault(config: path, environment: environment) { vault, _ in
            let deleted = try await vault.delete(CardID(id), event: SecurityEvent(at: Date(), kind: .vaultDeleted, actor: actor, cardID: CardID(shown(id))))
            return deleted ? .ok("deleted the vault entry for \(shown(id))")
                : .failed("no vault entry for \(shown(id)): nothing deleted (card ids are case-sensitive)")
        }
    }

    /// `vault rotate`: re-seals every entry under the active key, deletes orphans.
    public static func rotateVault(
        config path: String, actor: String, environment: [String: String] = ProcessInfo.processInfo.environment
    ) async -> ToolOutcome {
        await withVault(config: path, environment: environment) { vault, store in
            // A rotation onto a key that holds an older one's bytes would re-seal everything and
            // change nothing (the CLI audit's rotation said it re-sealed 300).
            if !vault.keyring.sameKeys.isEmpty {
                return .failed("\(vault.keyring.sameKeys.joined(separator: "; ")): a rotated-in key must be a new one (openssl rand -base64 32); nothing was re-sealed")
            }
            let report = await vault.rotate()
            var detail = ["resealed": "\(report.resealed)", "current": "\(report.current)", "unreadable": "\(report.unreadable.count)",
                          "orphans_deleted": "\(report.orphansDeleted.count)", "changed_meanwhile": "\(report.changedMeanwhile.count)"]
            if report.interruptedBy != nil { detail["interrupted"] = "true" }
            // Recorded however far it got: what it re-sealed before a failure stays re-sealed.
            do {
                try await store.appendSecurityEvent(SecurityEvent(at: Date(), kind: .vaultRotated, actor: actor, detail: detail))
            } catch {
                guard let interrupted = report.interruptedBy else { throw error }
                return .failed("vault rotate stopped after re-sealing \(report.resealed) entries (\(interrupted)), and its security event "
                    + "could not be written either (\(error)): run it again to finish; the next run is recorded")
            }
            if let interrupted = report.interruptedBy {
                return .failed("vault rotate stopped after re-sealing \(report.resealed) entries, which stay re-sealed (recorded): "
                    + "\(interrupted); run it again to finish")
            }
            var outcome = ToolOutcome.ok("re-sealed \(report.resealed), already current \(report.current), "
                + "orphans deleted \(report.orphansDeleted.count), unreadable \(report.unreadable.count)"
                + (report.changedMeanwhile.isEmpty ? ""
                    : ", changed while re-sealing \(report.changedMeanwhile.count) (left as changed; run again to check them)"))
            if !report.unreadable.isEmpty {
                outcome.failure = "no listed key opens the entries of: \(report.unreadable.map { shown($0.rawValue) }.joined(separator: ", "))"
            }
            return outcome
        }
    }
}

/// The process-wide logging the executable sets up, on standard error at `level`: readable lines
/// (`text`), each escaped so no input (a card id, a header, a path) can start a log line of its
/// own, or one JSON object per line (`json`, for log pipelines; see `JSONLogHandler`).
public enum GatewayLogging {
    public static func bootstrap(level: Logger.Level, format: LogFormat = .text) {
        switch format {
        case .text:
            LoggingSystem.bootstrap { label in
                var handler = StreamLogHandler.standardError(label: label)
                handler.logLevel = level
                return LineSafeLogHandler(handler)
            }
        case .json:
            LoggingSystem.bootstrap { label in
                var handler = JSONLogHandler.standardError(label: label)
                handler.logLevel = level
                return handler
            }
        }
    }
}

/// The config file as start-up reads it (for the executable, which does not import `Gateway`).
public enum GatewayConfigFile {
    public static func load(path: String) throws(ConfigError) -> GatewayConfig {
        try ConfigLoader.load(path: path)
    }
}
