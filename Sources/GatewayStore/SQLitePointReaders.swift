import Foundation
import GRDB
import Synchronization

/// Read-only connections of their own for the store's one-statement reads by key (every
/// provisioning's card read), beside GRDB's reader pool.
///
/// GRDB's `DatabasePool` read takes a reader through its pool (a barrier queue, a semaphore, a
/// dispatch group, a lock and a key path built at every call) before running ours: close to half
/// of a card read's CPU. A lone statement needs none of that. Each connection here is a read-only
/// `DatabaseQueue` on the same file; a read takes the next one in turn and runs on the calling
/// thread (`DispatchQueue.sync` on the connection's own queue, which runs the block here while
/// that queue is idle). There are at least as many connections as threads in Swift's cooperative
/// pool (one per core), so a read waits for another only when the turn order happens to give two
/// readers the same connection, and then for one short statement, never for a suspended task: no
/// read here holds its connection across an `await`.
///
/// What a read sees is the latest commit: each read is one deferred read transaction, begun
/// before its statement and ended after it (WAL mode lets it run beside the writer). Like GRDB's
/// readers, each read first compares, in that transaction, the database's schema version with
/// the one its connection last saw and, when a migration (this process's or another's) changed
/// it, clears the connection's schema and statement caches: GRDB keeps a cached statement's
/// column names, so a `SELECT *` cached before a migration that added a column would otherwise go
/// on reading the old columns. Two statements that must agree do not belong here.
final class SQLitePointReaders: Sendable {
    /// The default number of connections: as many as GRDB's own reader pool keeps (5), or one
    /// per core where there are more (each is a file descriptor and a page cache of its own).
    static let defaultCount = max(5, ProcessInfo.processInfo.activeProcessorCount)

    /// A connection and the schema version it last saw. `schemaVersion` is read and written only
    /// inside a read on `queue`, which runs one block at a time.
    private final class Connection: @unchecked Sendable {
        let queue: DatabaseQueue
        var schemaVersion: Int32?

        init(_ queue: DatabaseQueue) { self.queue = queue }
    }

    private let connections: [Connection]
    private let turn = Atomic<UInt>(0)

    /// Opens `count` read-only connections on the database at `path`, which must exist already
    /// (the store's writer creates it and sets WAL mode first).
    init(path: String, count: Int = defaultCount) throws {
        precondition(count > 0, "a point reader needs at least one connection")
        var configuration = Configuration()
        configuration.readonly = true
        // The writer's own setting: a reader that meets a lock (a WAL reset by a checkpoint)
        // waits for it instead of failing.
        configuration.busyMode = .timeout(5)
        connections = try (0..<count).map { _ in Connection(try DatabaseQueue(path: path, configuration: configuration)) }
    }

    /// The number of connections.
    var count: Int { connections.count }

    /// Runs `body`, which must run ONE statement, on the next connection in turn, on the calling
    /// thread.
    func read<T>(_ body: (Database) throws -> T) throws -> T {
        let index = turn.wrappingAdd(1, ordering: .relaxed).oldValue % UInt(connections.count)
        let connection = connections[Int(index)]
        return try connection.queue.unsafeRead { db in
            // The schema check and the statement in one read transaction: one snapshot, and one
            // start of a read (its locks on the WAL index, and the page cache SQLite drops when
            // anything was committed since this connection's last read) where two autocommit
            // statements paid it twice. A read that fails, its end included, leaves no
            // transaction open behind it.
            try db.cachedStatement(sql: "BEGIN DEFERRED TRANSACTION").execute()
            do {
                let version = try db.schemaVersion()
                if version != connection.schemaVersion {
                    db.clearSchemaCache()
                    connection.schemaVersion = version
                }
                let value = try body(db)
                try db.cachedStatement(sql: "COMMIT TRANSACTION").execute()
                return value
            } catch {
                if db.isInsideTransaction { try? db.cachedStatement(sql: "ROLLBACK TRANSACTION").execute() }
                throw error
            }
        }
    }
}
