import Foundation
import Gateway
import GatewayTestSupport
import GatewayStore
import ProvisioningCore
import Testing

@Suite struct CardImportTests {
    let importer = CardImport(registration: CardRegistration(issuers: try! ConfigLoader.load(
        path: ConfigLoaderTests.packageRoot.appendingPathComponent("Config/gateway.yaml").path).issuers))

    func store() async throws -> SQLiteGatewayStore {
        let path = TestDirectories.root.appendingPathComponent("import-\(UUID().uuidString)/g.sqlite").path
        let store = try await SQLiteGatewayStore.open(path: path)
        try await store.migrate()
        return store
    }

    /// The problems of an import expected to be refused; none (and an issue) when it was not.
    static func problems(_ result: CardImport.Result, _ otherwise: Comment) -> [CardImport.Problem] {
        guard case .rejected(let problems) = result else {
            Issue.record(otherwise)
            return []
        }
        return problems
    }

    static let good = """
        card_id,program,issuer,customer_id,card_account_id,issuer_card_id
        card_a,demo,bridge,cust_a,ca_a,
        card_b,demo,tmp,,,tmp_b
        "card_c",demo,crossmint,,,"cm,c"
        """

    @Test func aGoodFileImportsEveryRowAndTwiceChangesNothing() async throws {
        let store = try await store()
        #expect(try await importer.run(Self.good, into: store) == .imported(count: 3))
        let first = try await store.cards(CardPageQuery(limit: 10))
        #expect(first.map(\.id) == ["card_a", "card_b", "card_c"])
        #expect(first[0].issuerReference == IssuerReference(["customer_id": "cust_a", "card_account_id": "ca_a"]))
        #expect(first[2].issuerReference == IssuerReference(["issuer_card_id": "cm,c"]))
        #expect(try await importer.run(Self.good, into: store) == .imported(count: 3))
        #expect(try await store.cards(CardPageQuery(limit: 10)) == first)
    }

    static func tmpCards(_ ids: [String]) -> String {
        "card_id,program,issuer,issuer_card_id\n" + ids.map { "\($0),demo,tmp,tmp_\($0)\n" }.joined()
    }

    /// A large import holds the store's write lock one batch at a time: between two batches (each
    /// one transaction with its own security event) another connection to the same file, a
    /// serving gateway's, writes without waiting. One transaction for 200,000 rows had held it for
    /// 40 s, and provisionings failed with their audit events unwritten.
    @Test func aLargeImportIsWrittenInBatchesAndAnotherWriterGetsInBetween() async throws {
        let path = TestDirectories.root.appendingPathComponent("import-\(UUID().uuidString)/g.sqlite").path
        let importing = try await SQLiteGatewayStore.open(path: path)
        try await importing.migrate()
        let serving = try await SQLiteGatewayStore.open(path: path)
        let clock = TestClock()
        let importer = self.importer
        let run = Task {
            try await importer.run(Self.tmpCards(["c1", "c2", "c3", "c4", "c5"]), into: importing, batchRows: 2, pause: .milliseconds(120),
                                   clock: clock) { count in SecurityEvent(at: Date(), kind: .cardsImported, actor: "cli:test", detail: ["count": "\(count)"]) }
        }
        for written in [2, 4] {
            try #require(await clock.waitForSleepers(1))
            #expect(clock.requestedSleeps.last == .milliseconds(120))
            #expect(try await serving.cards(CardPageQuery(limit: 10)).count == written)
            // The lock is free: the serving side's audit write goes through now.
            let event = AuditEvent(provisioningID: ProvisioningID("prv_\(written)"), at: Date(), client: "acme", cardID: "c1", operation: .applePay,
                                   issuer: "tmp", endpoint: nil, attempt: 1, outcome: .succeeded, errorCode: nil, upstreamStatus: 200, latencyMS: 1)
            try await serving.appendAudit(event)
            #expect(try await serving.auditEvents(ProvisioningID("prv_\(written)")).count == 1)
            clock.advance(by: .milliseconds(120))
        }
        #expect(try await run.value == .imported(count: 5))
        #expect(try await serving.cards(CardPageQuery(limit: 10)).map(\.id) == ["c1", "c2", "c3", "c4", "c5"])
        let events = try await serving.securityEvents(SecurityEventQuery(kind: .cardsImported, limit: 10))
        #expect(events.map { $0.detail["count"] }.sorted { ($0 ?? "") < ($1 ?? "") } == ["1", "2", "2"])
    }

    /// A batch that fails stops the import there: the batches before it stay written, nothing
    /// after it is, and the answer says how far it got; the same file fixed and run again finishes
    /// it. A file of one batch is still all rows or none.
    @Test func aFailingBatchStopsTheImportAndSaysHowFarItGot() async throws {
        let store = try await store()
        // Another card already holds the reference of the file's fourth card.
        #expect(try await importer.run(Self.tmpCards(["holder"]).replacingOccurrences(of: "tmp_holder", with: "tmp_c4"), into: store)
                == .imported(count: 1))
        let file = Self.tmpCards(["c1", "c2", "c3", "c4", "c5"])
        let result = try await importer.run(file, into: store, batchRows: 2, pause: .zero)
        guard case .stopped(let imported, let total, let reason) = result else {
            Issue.record("\(result)")
            return
        }
        #expect(imported == 2 && total == 5)
        #expect(reason.contains("cards 3-4") && reason.contains("already used by another card"), "\(reason)")
        #expect(try await store.cards(CardPageQuery(limit: 10)).map(\.id) == ["c1", "c2", "holder"])
        // One batch: nothing written.
        let whole = try await importer.run(file, into: store, batchRows: 0)
        guard case .rejected(let problems) = whole else {
            Issue.record("\(whole)")
            return
        }
        #expect(problems.count == 1)
        #expect(try await store.cards(CardPageQuery(limit: 10)).map(\.id) == ["c1", "c2", "holder"])
        _ = try await store.deleteCard("holder", owners: nil, event: nil)
        #expect(try await importer.run(file, into: store, batchRows: 2, pause: .zero) == .imported(count: 5))
    }

    /// Blank lines (a trailing one, a CRLF file's) hold no card and are no problem; a column named
    /// twice is, since one of its cells would be dropped without a word.
    @Test func blankLinesAreSkippedAndAColumnNamedTwiceIsRefused() async throws {
        let store = try await store()
        #expect(try await importer.run(Self.tmpCards(["b1", "b2"]) + "\n\n", into: store) == .imported(count: 2))
        #expect(try await importer.run(Self.tmpCards(["b3"]).replacingOccurrences(of: "\n", with: "\r\n") + "\r\n", into: store) == .imported(count: 1))
        let twice = "card_id,program,issuer,issuer_card_id,issuer_card_id\nd1,demo,tmp,tmp_d1,tmp_OTHER\n"
        #expect(try await importer.run(twice, into: store) == .rejected([CardImport.Problem(line: 1, reason: "column(s) named more than once: issuer_card_id")]))
        #expect(try await store.card("d1") == nil)
    }

    /// Two rows with one issuer reference, in any letter case, are refused before any batch is
    /// written (they fell in different batches, the store would have refused the second part-way).
    @Test func oneReferenceOnTwoRowsIsRefusedBeforeAnythingIsWritten() async throws {
        let store = try await store()
        let file = Self.tmpCards(["r1", "r2", "r3"]) + "r4,demo,tmp,TMP_R1\n"
        #expect(try await importer.run(file, into: store, batchRows: 1, pause: .zero)
                == .rejected([CardImport.Problem(line: 5, reason: "issuer_reference: the same as on line 2 (letter case aside)")]))
        #expect(try await store.cards(CardPageQuery(limit: 10)).isEmpty)
        // A Bridge card account is one card whatever customer id a row gives it (schema 014).
        let accounts = "card_id,program,issuer,customer_id,card_account_id\nb1,demo,bridge,cust_1,ca_9\nb2,demo,bridge,cust_2,CA_9\n"
        #expect(try await importer.run(accounts, into: store, batchRows: 1, pause: .zero)
                == .rejected([CardImport.Problem(line: 3, reason: "issuer_reference: the same as on line 2 (letter case aside)")]))
        #expect(try await store.cards(CardPageQuery(limit: 10)).isEmpty)
    }

    /// Local cards hold no reference, so they share none: a file may register any number of them
    /// (it took one, every other row refused as holding the first's reference).
    @Test func aFileMayHoldManyLocalCards() async throws {
        let store = try await store()
        let local = CardImport(registration: CardRegistration(issuers: try ConfigLoader.load(
            path: ConfigLoaderTests.packageRoot.appendingPathComponent("Config/gateway.yaml").path).issuers, localEnabled: true))
        let file = "card_id,program,issuer\n" + (1...50).map { "local_\($0),demo,local" }.joined(separator: "\n") + "\n"
        #expect(try await local.run(file, into: store, batchRows: 7, pause: .zero) == .imported(count: 50))
        #expect(try await store.cards(CardPageQuery(limit: 100)).filter { $0.issuer == "local" }.count == 50)
    }

    @Test func movingCardsToAnotherIssuerIsAnotherImport() async throws {
        let store = try await store()
        _ = try await importer.run(Self.good, into: store)
        // card_a has a vault entry, card_b one too: the move removes card_a's (it was sealed for
        // the card at its former issuer) and says so; an import that moves nothing removes none.
        try await store.putVaultEntry("card_a", sealed: Data(repeating: 1, count: 64), event: nil)
        try await store.putVaultEntry("card_b", sealed: Data(repeating: 2, count: 64), event: nil)
        let moved = "card_id,program,issuer,issuer_card_id\ncard_a,demo,tmp,tmp_a\n"
        #expect(try await importer.run(moved, into: store) == .imported(count: 1, vaultEntriesRemoved: 1))
        #expect(try await store.card("card_a")?.issuer == "tmp")
        #expect(try await store.vaultEntry("card_a") == nil)
        #expect(try await store.vaultEntry("card_b") != nil)
        #expect(try await importer.run(moved, into: store) == .imported(count: 1, vaultEntriesRemoved: 0))
    }

    @Test func badRowsAreAllReportedByLineAndNothingIsImported() async throws {
        let store = try await store()
        let file = """
            card_id,program,issuer,customer_id,card_account_id,issuer_card_id
            card_ok,demo,bridge,cust,ca,
            card_x,demo,bridge,cust_only,,
            card_y,demo,stripe,,,
            card_ok,demo,tmp,,,t
            bad id,demo,tmp,,,t
            """
        let result = try await importer.run(file, into: store)
        guard case .rejected(let problems) = result else {
            Issue.record("a bad file was imported")
            return
        }
        #expect(problems.map(\.line) == [3, 4, 5, 6])
        #expect(problems[0].description == "line 3: issuer_reference.card_account_id: required for a bridge card")
        #expect(problems[1].reason.hasPrefix("issuer: unknown issuer 'stripe'"))
        #expect(problems[2].reason == "card_id: card_ok already on line 2")
        #expect(problems[3].reason.hasPrefix("card_id:"))
        #expect(try await store.cards(CardPageQuery(limit: 10)).isEmpty)
    }

    /// A quoted cell may span lines: a problem names the row's line in the file, as an editor
    /// shows it, not its place among the rows (CLI audit: every line after such a cell was off).
    @Test(arguments: ["\n", "\r\n", "\r"])
    func aProblemAfterAQuotedLineBreakNamesTheFilesLine(_ newline: String) async throws {
        let file = [
            "card_id,program,issuer,issuer_card_id",
            "card_a,demo,tmp,\"tmp a\(newline)spans\(newline)three lines\"",
            "card_b,demo,stripe,tmp_b",
            "card_c,demo,tmp,\"tmp\(newline)c\"",
            "card_d,demo,stripe,tmp_d",
        ].joined(separator: newline) + newline
        let problems = Self.problems(try await importer.run(file, into: try await store()), "a file with an unknown issuer was imported")
        // No column holds a line break (the quoted rows are refused too); the rows after them are
        // placed by the file's lines.
        #expect(problems.map(\.line) == [2, 5, 6, 8])
        #expect(problems.map { $0.reason.hasPrefix("issuer: unknown issuer 'stripe'") } == [false, true, false, true])
        #expect(problems[0].reason.hasPrefix("issuer_reference.issuer_card_id"), "\(problems[0].reason)")
    }

    /// A card number as a program or an issuer (columns shifted by one) is refused by line and
    /// never repeated; it was imported and printed by `route explain` (CLI audit H2). A reference
    /// is the issuer's id, taken as given.
    @Test func aCardNumberAsANameIsRefusedWithoutEcho() async throws {
        let store = try await store()
        let file = "card_id,program,issuer,customer_id,card_account_id,issuer_card_id\n"
            + "imp_1,4111111111111111,bridge,cust_1,ca_1,\n"
            + "imp_2,demo,4111111111111111,,,tmp_2\n"
            + "imp_3,demo,tmp,,,tmp_3\n"
        let problems = try await Self.problems(importer.run(file, into: store), "card numbers were imported")
        #expect(Set(problems.map(\.line)) == [2, 3], "\(problems)")
        #expect(!problems.contains { $0.description.contains("4111") }, "\(problems)")
        #expect(try await store.cards(CardPageQuery(limit: 10)).isEmpty)
    }

    /// A row with more or fewer cells than the header is shifted or cut: refused by line, never
    /// imported with its extra cells dropped; and a repeated id that breaks the id rule (a card
    /// number, terminal escapes) is not repeated in the problem.
    @Test func misshapenRowsAndUnreadableRepeatedIdsAreRefusedWithoutEcho() async throws {
        let store = try await store()
        let file = "card_id,program,issuer,issuer_card_id\n"
            + "imp_1,demo,tmp,tmp_1,4111111111111111,123\n"
            + "imp_2,demo,tmp\n"
            + "imp_3,demo,tmp,tmp_3\n"
            + "4111111111111111 cvv 123\u{1B}[2J,demo,tmp,tmp_4\n"
            + "4111111111111111 cvv 123\u{1B}[2J,demo,tmp,tmp_5\n"
        let problems = try await Self.problems(importer.run(file, into: store), "a misshapen file was imported")
        #expect(problems.first { $0.line == 2 }?.reason == "6 cells where the header names 4 columns", "\(problems)")
        #expect(problems.first { $0.line == 3 }?.reason == "3 cells where the header names 4 columns", "\(problems)")
        #expect(!problems.contains { $0.line == 4 }, "a good row is not a problem")
        #expect(problems.contains { $0.line == 6 && $0.reason == "card_id: the same as on line 5" }, "\(problems)")
        #expect(!problems.contains { $0.description.contains("4111") || $0.description.contains("\u{1B}") }, "\(problems)")
        #expect(try await store.cards(CardPageQuery(limit: 10)).isEmpty)

        // A last row ending in an empty cell, without a final newline, has all its cells.
        let unended = "card_id,program,issuer,customer_id,card_account_id,issuer_card_id\ncard_1002,demo,bridge,cust_77,ca_1002,"
        #expect(try await importer.run(unended, into: store) == .imported(count: 1))
        // Windows line ends (a spreadsheet's export), the last one included.
        let crlf = "card_id,program,issuer,customer_id,card_account_id,issuer_card_id\r\ncard_1003,demo,bridge,cust_78,ca_1003,\r\n"
        #expect(try await importer.run(crlf, into: store) == .imported(count: 1))
    }

    @Test func aFileWithoutTheRequiredColumnsIsRefused() async throws {
        let result = try await importer.run("id,program\nc,demo\n", into: try await store())
        #expect(result == .rejected([CardImport.Problem(line: 1, reason: "missing column(s): card_id, issuer")]))
    }

    @Test func anEmptyFileIsRefused() async throws {
        let result = try await importer.run("card_id,program,issuer\n", into: try await store())
        #expect(result == .rejected([CardImport.Problem(line: 2, reason: "the file has no card rows")]))
    }
}
