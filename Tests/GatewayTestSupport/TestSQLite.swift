import GRDB

/// A test's own connection to a store's SQLite file, beside the gateway or tool using it. It waits
/// (up to 10 s) for another connection's write to end, where GRDB's default fails at once with
/// "database is locked": a test that added a trigger under a running gateway failed so when the
/// gateway's background writer was in a transaction at that moment.
public enum TestSQLite {
    public static func queue(_ path: String) throws -> DatabaseQueue {
        var configuration = Configuration()
        configuration.busyMode = .timeout(10)
        return try DatabaseQueue(path: path, configuration: configuration)
    }
}
