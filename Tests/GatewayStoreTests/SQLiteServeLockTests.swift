import Foundation
import GatewayStore
import GatewayTestSupport
import ProvisioningCore
import Testing

/// One `serve` per SQLite file: the lock beside the database is taken once, names its holder to
/// the one refused, and is free again once its holder is gone.
@Suite struct SQLiteServeLockTests {
    static func databasePath(_ name: String) -> String {
        TestDirectories.root.appendingPathComponent("serve-lock-\(name)-\(UUID().uuidString)/state/gateway.sqlite").path
    }

    @Test func aSecondLockIsRefusedNamingTheHolderAndTakenOnceTheFirstIsGone() throws {
        let database = Self.databasePath("second")
        var first: SQLiteServeLock? = try SQLiteServeLock(databasePath: database)
        #expect(first?.path == database + ".serve-lock")
        // The holder's pid, for the refused one's message.
        let written = try String(contentsOfFile: database + ".serve-lock", encoding: .utf8)
        #expect(written == "\(getpid())\n")

        let refusal = #expect(throws: StoreError.self) { try SQLiteServeLock(databasePath: database) }
        #expect(refusal?.reason.contains("another gateway serves this store (pid \(getpid()))") == true, "\(String(describing: refusal))")
        #expect(refusal?.reason.contains("use PostgreSQL for several instances") == true)

        first = nil
        let again = try SQLiteServeLock(databasePath: database)
        #expect(again.path == database + ".serve-lock")
    }

    /// Another name for the same database (a symbolic link to the file, or to its directory)
    /// meets the same lock.
    @Test func aSecondNameForTheSameDatabaseMeetsTheSameLock() throws {
        let database = Self.databasePath("alias")
        let directory = URL(fileURLWithPath: database).deletingLastPathComponent()
        let held = try SQLiteServeLock(databasePath: database)
        FileManager.default.createFile(atPath: database, contents: nil)
        let fileAlias = directory.appendingPathComponent("alias.sqlite").path
        try FileManager.default.createSymbolicLink(atPath: fileAlias, withDestinationPath: database)
        let directoryAlias = directory.deletingLastPathComponent().appendingPathComponent("state-alias").path
        try FileManager.default.createSymbolicLink(atPath: directoryAlias, withDestinationPath: directory.path)
        for alias in [fileAlias, directoryAlias + "/gateway.sqlite"] {
            #expect(throws: StoreError.self, "\(alias)") { try SQLiteServeLock(databasePath: alias) }
        }
        #expect(held.path.hasSuffix(".serve-lock"))
    }

    @Test func theLockFileIsTheGatewaysOnlyAndOtherStoresHaveTheirOwn() throws {
        let database = Self.databasePath("mode")
        let lock = try SQLiteServeLock(databasePath: database)
        let attributes = try FileManager.default.attributesOfItem(atPath: lock.path)
        #expect(try #require(attributes[.posixPermissions] as? Int) & 0o777 == 0o600)
        // The directories it made are the store's (0700).
        let directory = URL(fileURLWithPath: database).deletingLastPathComponent().path
        let directoryMode = try #require(try FileManager.default.attributesOfItem(atPath: directory)[.posixPermissions] as? Int)
        #expect(directoryMode & 0o777 == 0o700)
        // Another database beside it is another store.
        let other = try SQLiteServeLock(databasePath: directory + "/other.sqlite")
        #expect(other.path != lock.path)
    }
}
