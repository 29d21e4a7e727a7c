import Foundation
import GatewayTestSupport
@testable import GatewayStore
import GRDB
import Testing

@Suite struct SQLitePointReadersTests {
    /// A WAL database with one table `t (id, value)` and its writer, as the store opens them.
    func withDatabase(_ body: (String, DatabasePool) async throws -> Void) async throws {
        let directory = TestDirectories.root.appendingPathComponent("point-readers-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("db.sqlite").path
        var configuration = Configuration()
        configuration.journalMode = .wal
        let writer = try DatabasePool(path: path, configuration: configuration)
        try await writer.write { db in
            try db.execute(sql: "CREATE TABLE t (id INTEGER PRIMARY KEY, value TEXT NOT NULL)")
            try db.execute(sql: "INSERT INTO t (id, value) VALUES (1, 'v0')")
        }
        try await body(path, writer)
    }

    /// Row 1's value, read as the store reads a card: one cached statement on the next connection.
    static func value(_ readers: SQLitePointReaders) throws -> String? {
        try readers.read(valueHere)
    }

    /// Row 1's value, on a connection already given.
    static func valueHere(_ db: Database) throws -> String? {
        try String.fetchOne(db.cachedStatement(sql: "SELECT value FROM t WHERE id = ?"), arguments: [1])
    }

    @Test func eachReadTakesTheNextConnectionInTurn() async throws {
        try await withDatabase { path, _ in
            let readers = try SQLitePointReaders(path: path, count: 3)
            #expect(readers.count == 3)
            let used = try (0..<7).map { _ in try readers.read { db in ObjectIdentifier(db) } }
            #expect(Set(used).count == 3)
            // In turn: the fourth read is on the first read's connection, and so on.
            #expect(Array(used[3..<6]) == Array(used[0..<3]))
            #expect(used[6] == used[0])
        }
    }

    @Test func theConnectionsCannotWriteAndNeverCreateAFile() async throws {
        try await withDatabase { path, writer in
            let readers = try SQLitePointReaders(path: path, count: 2)
            for _ in 0..<2 {
                let error = #expect(throws: DatabaseError.self) {
                    try readers.read { db in try db.execute(sql: "UPDATE t SET value = 'changed' WHERE id = 1") }
                }
                #expect(error?.resultCode == .SQLITE_READONLY)
            }
            #expect(try await writer.read { db in try String.fetchOne(db, sql: "SELECT value FROM t WHERE id = 1") } == "v0")

            let missing = URL(fileURLWithPath: path).deletingLastPathComponent().appendingPathComponent("missing.sqlite").path
            #expect(throws: (any Error).self) { try SQLitePointReaders(path: missing, count: 1) }
            #expect(!FileManager.default.fileExists(atPath: missing))
        }
    }

    /// A read is one read transaction: its statement runs inside a transaction, which is over when
    /// the read returns or throws, so the connection's next read sees what was committed meanwhile.
    @Test func aReadIsOneTransactionEndedWhenItReturnsOrThrows() async throws {
        struct Refused: Error {}
        try await withDatabase { path, writer in
            let readers = try SQLitePointReaders(path: path, count: 1)
            #expect(try readers.read { db in db.isInsideTransaction ? try Self.valueHere(db) : nil } == "v0")
            for (index, failing) in [true, false, true].enumerated() {
                if failing {
                    #expect(throws: Refused.self) { try readers.read { db in _ = try Self.valueHere(db); throw Refused() } }
                } else {
                    _ = try Self.value(readers)
                }
                try await writer.write { db in try db.execute(sql: "UPDATE t SET value = ? WHERE id = 1", arguments: ["w\(index)"]) }
                #expect(try readers.read { db in (db.isInsideTransaction, try Self.valueHere(db)) } == (true, "w\(index)"))
            }
        }
    }

    /// Readers beside the writer: every read sees a committed value, never fails as busy, and
    /// once the last write has committed, every connection sees it.
    @Test func concurrentReadsBesideTheWriterSeeOnlyCommittedValues() async throws {
        try await withDatabase { path, writer in
            let readers = try SQLitePointReaders(path: path, count: 3)
            let writes = 100
            try await withThrowingTaskGroup(of: Set<String>.self) { group in
                group.addTask {
                    for index in 1...writes {
                        try await writer.write { db in try db.execute(sql: "UPDATE t SET value = ? WHERE id = 1", arguments: ["v\(index)"]) }
                    }
                    return []
                }
                for _ in 0..<4 {
                    group.addTask {
                        var seen = Set<String>()
                        for _ in 0..<300 {
                            seen.insert(try #require(try Self.value(readers)))
                            await Task.yield()
                        }
                        return seen
                    }
                }
                let committed = Set((0...writes).map { "v\($0)" })
                for try await seen in group { #expect(seen.isSubset(of: committed)) }
            }
            let latest = try (0..<readers.count).map { _ in try Self.value(readers) }
            #expect(latest == Array(repeating: "v\(writes)", count: readers.count))
        }
    }

    /// A statement each connection cached before a migration still runs after it, on the new
    /// schema: SQLite prepares it again (the store's connections outlive `migrate()`).
    @Test func aStatementCachedBeforeAMigrationRunsOnTheNewSchema() async throws {
        try await withDatabase { path, writer in
            let readers = try SQLitePointReaders(path: path, count: 1)
            let sql = "SELECT * FROM t WHERE id = ?"
            let before = try readers.read { db in try Row.fetchOne(db.cachedStatement(sql: sql), arguments: [1]) }
            #expect(before?.count == 2)
            try await writer.write { db in
                try db.execute(sql: "ALTER TABLE t ADD COLUMN note TEXT NOT NULL DEFAULT 'added'")
            }
            let after = try readers.read { db in try Row.fetchOne(db.cachedStatement(sql: sql), arguments: [1]) }
            #expect(after?.count == 3)
            #expect(after?["note"] == "added")
        }
    }
}
