import Foundation
import ProvisioningCore
import SwiftCSV

/// Moves cards between issuers in bulk: a CSV of `card_id, program, issuer` and then the issuer
/// reference fields, every row checked before any is written, then written in batches of
/// `batchRows` (each one transaction with its own security event) with a pause between them. A
/// serving gateway's writes wait for a batch, never for the whole file: on SQLite one transaction
/// of 200,000 rows held the only write lock for 40 s, and provisionings whose issuer had already
/// answered failed (500) with their audit events unwritten. Running the same file twice leaves
/// the registry as after the first run, so an import stopped part-way is finished by running it
/// again. A file of at most `batchRows` cards is one transaction, all rows or none.
public struct CardImport: Sendable {
    public static let requiredColumns = ["card_id", "program", "issuer"]

    public struct Problem: Sendable, Equatable, CustomStringConvertible {
        /// The line in the file (the header is line 1).
        public let line: Int
        public let reason: String
        public init(line: Int, reason: String) {
            self.line = line
            self.reason = reason
        }
        public var description: String { "line \(line): \(reason)" }
    }

    public enum Result: Sendable, Equatable {
        /// `vaultEntriesRemoved`: entries of cards the file moved to another program, issuer or
        /// reference (the vault's data was another card's), which the import deleted.
        case imported(count: Int, vaultEntriesRemoved: Int = 0)
        /// Nothing was written.
        case rejected([Problem])
        /// The first `imported` of `total` cards were written (whole batches), then a batch failed
        /// (`reason`) and nothing after it was written.
        case stopped(imported: Int, total: Int, reason: String)
    }

    /// Cards per transaction: about 0.1 s of a SQLite write lock.
    public static let defaultBatchRows = 500
    /// Between two batches: longer than SQLite's busy handler sleeps between two looks at the
    /// lock (at most 100 ms), so that a serving gateway waiting for it gets it.
    public static let pauseBetweenBatches: Duration = .milliseconds(120)

    let registration: CardRegistration
    public init(registration: CardRegistration) { self.registration = registration }

    /// The line breaks inside a cell (a quoted cell may span lines): `\r\n`, `\n` and `\r`, each one.
    static func lineBreaks(in cell: String) -> Int {
        var count = 0
        var afterCR = false
        for scalar in cell.unicodeScalars {
            if scalar == "\r" {
                count += 1
            } else if scalar == "\n" && !afterCR {
                count += 1
            }
            afterCR = scalar == "\r"
        }
        return count
    }

    /// Parses and checks the file; the cards to write, or every problem found.
    public func parse(_ file: String) -> Swift.Result<[CardRecord], CardImportError> {
        // SwiftCSV drops an empty last cell on a last line without its newline (`...,ca_1002,`
        // would count one cell short): every line is read as ended.
        // (By scalars: "\r\n" is one Character, which `hasSuffix("\n")` would not see.)
        let ended = file.unicodeScalars.last.map { $0 == "\n" || $0 == "\r" } ?? true
        let text = ended ? file : file + "\n"
        // The header from SwiftCSV's own view; the rows from its parser, once, as read (its row views
        // pad short rows and drop extra cells, which would hide a shifted row).
        let csv: CSV<Enumerated>
        var rows: [[String]] = []
        do {
            csv = try CSV<Enumerated>(string: text, delimiter: .comma, loadColumns: false, rowLimit: 1)
            try csv.enumerateAsArray(startAt: 1, rowLimit: nil) { rows.append($0) }
        } catch {
            return .failure(CardImportError(problems: [Problem(line: 1, reason: "not a readable CSV file")]))
        }
        let header = csv.header.map { $0.trimmingCharacters(in: .whitespaces) }
        let missing = Self.requiredColumns.filter { !header.contains($0) }
        guard missing.isEmpty else {
            return .failure(CardImportError(problems: [Problem(line: 1, reason: "missing column(s): \(missing.joined(separator: ", "))")]))
        }
        // A column named twice would have one of its cells dropped without a word (which one, a
        // reader could not tell): the shifted-cell danger again.
        let repeated = Dictionary(grouping: header, by: { $0 }).filter { $0.value.count > 1 }.keys.sorted()
        guard repeated.isEmpty else {
            return .failure(CardImportError(problems: [Problem(
                line: 1, reason: "column(s) named more than once: \(repeated.map(InputRules.short).joined(separator: ", "))")]))
        }
        var problems: [Problem] = []
        var cards: [CardRecord] = []
        var seen: [String: Int] = [:]
        var references: [String: Int] = [:]
        // A quoted cell may hold line breaks, so a row's line in the file is counted, not its index.
        var nextLine = 2 + csv.header.reduce(0) { $0 + Self.lineBreaks(in: $1) }
        for cells in rows {
            let line = nextLine
            nextLine += 1 + cells.reduce(0) { $0 + Self.lineBreaks(in: $1) }
            // A blank line (an editor's last newline, or a CRLF file's) holds no card.
            if cells.allSatisfy({ $0.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty }) && cells.count <= 1 { continue }
            // A row with more or fewer cells than the header names is shifted or cut: its cells would
            // land in the wrong columns (or be dropped without a word), so it is a problem of its own.
            guard cells.count == header.count else {
                problems.append(Problem(line: line, reason: "\(cells.count) cells where the header names \(header.count) columns"))
                continue
            }
            let row = Dictionary(zip(header, cells), uniquingKeysWith: { first, _ in first })
            let value = { (column: String) in (row[column] ?? "").trimmingCharacters(in: .whitespaces) }
            var reference: [String: String] = [:]
            for column in header where !Self.requiredColumns.contains(column) && !value(column).isEmpty {
                reference[column] = value(column)
            }
            let id = value("card_id")
            if let first = seen[id] {
                // The id is named only when it keeps the id rule (the rule's own problem names none):
                // a cell may hold anything, a card number or terminal escapes included.
                problems.append(Problem(line: line, reason: InputRules.isCardID(id) ? "card_id: \(InputRules.short(id)) already on line \(first)"
                                                                                   : "card_id: the same as on line \(first)"))
                continue
            }
            seen[id] = line
            let rowProblems = registration.problems(id: id, program: value("program"), issuer: value("issuer"), reference: reference)
            if rowProblems.isEmpty {
                // Two rows naming one card at one issuer (by its naming field, letter case aside, as
                // the stores compare them) are refused here, before any batch is written, not by the
                // store part-way. Cards without a reference (`issuer: local`, whose card data is in
                // the vault) hold none, and any number of them may share a file (the audit's 3,000
                // local cards were 2,999 problems).
                let named = IssuerReference(reference).namingValue
                    ?? reference.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: "\u{0}")
                let held = value("issuer") + "\u{0}" + named.lowercased()
                if !reference.isEmpty, let first = references[held] {
                    problems.append(Problem(line: line, reason: "issuer_reference: the same as on line \(first) (letter case aside)"))
                    continue
                }
                references[held] = line
                cards.append(CardRecord(id: CardID(id), program: ProgramID(value("program")), issuer: IssuerID(value("issuer")),
                                        issuerReference: IssuerReference(reference)))
            } else {
                problems += rowProblems.map { Problem(line: line, reason: $0) }
            }
        }
        if cards.isEmpty && problems.isEmpty { problems.append(Problem(line: 2, reason: "the file has no card rows")) }
        return problems.isEmpty ? .success(cards) : .failure(CardImportError(problems: problems))
    }

    /// Checks every row, then writes them in batches of `batchRows` (0: all in one transaction),
    /// pausing `pause` on `clock` between two. `event(count)` is each batch's security event,
    /// written in that batch's transaction.
    public func run(
        _ text: String, into store: any GatewayStore, batchRows: Int = CardImport.defaultBatchRows,
        pause: Duration = CardImport.pauseBetweenBatches, clock: any Clock<Duration> = ContinuousClock(),
        event: (@Sendable (Int) -> SecurityEvent)? = nil
    ) async throws -> Result {
        switch parse(text) {
        case .failure(let error):
            return .rejected(error.problems)
        case .success(let cards):
            return try await write(cards, into: store, batchRows: batchRows, pause: pause, clock: clock, event: event)
        }
    }

    /// `run` for cards `parse` already read (the CLI reads the file before it opens a store).
    public func write(
        _ cards: [CardRecord], into store: any GatewayStore, batchRows: Int = CardImport.defaultBatchRows,
        pause: Duration = CardImport.pauseBetweenBatches, clock: any Clock<Duration> = ContinuousClock(),
        event: (@Sendable (Int) -> SecurityEvent)? = nil
    ) async throws -> Result {
        let size = batchRows > 0 ? batchRows : max(cards.count, 1)
        var written = 0
        var removed = 0
        while written < cards.count {
            if written > 0 { try await clock.sleep(for: pause) }
            let batch = Array(cards[written..<min(written + size, cards.count)])
            do {
                removed += try await store.importCards(batch, event: event?(batch.count))
            } catch {
                let reason = Self.reason(error, cards: written + 1...written + batch.count)
                guard written > 0 else {
                    if case CardRegistryError.issuerReferenceInUse = error { return .rejected([Problem(line: 1, reason: reason)]) }
                    throw error
                }
                return .stopped(imported: written, total: cards.count, reason: reason)
            }
            written += batch.count
        }
        return .imported(count: written, vaultEntriesRemoved: removed)
    }

    /// Why a batch (the file's cards `cards`, counted from 1) was not written.
    static func reason(_ error: any Error, cards: ClosedRange<Int>) -> String {
        let which = cards.count == 1 ? "card \(cards.lowerBound)" : "cards \(cards.lowerBound)-\(cards.upperBound)"
        if case CardRegistryError.issuerReferenceInUse = error {
            return "an issuer reference of the file's \(which) is already used by another card (or twice in the file)"
        }
        return "the file's \(which) could not be written: \(InputRules.short(String(describing: error)))"
    }
}

public struct CardImportError: Error, Sendable {
    public let problems: [CardImport.Problem]
}
