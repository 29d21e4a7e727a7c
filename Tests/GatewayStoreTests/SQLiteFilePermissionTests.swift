import Foundation
import GatewayTestSupport
import GatewayStore
import ProvisioningCore
import Testing

/// The database holds sealed card data and audit events: only the gateway's user may read it,
/// whatever the umask the process was started with. (The umask is process-wide and tests run in
/// parallel, so these leave it as it is: under the usual 022 the modes would be 0755 and 0644
/// if the store did not set them.)
@Suite struct SQLiteFilePermissionTests {
    func mode(_ path: String) throws -> Int {
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        return try #require(attributes[.posixPermissions] as? Int) & 0o777
    }

    @Test func theDirectoryIs0700AndTheDatabaseWALAndSHMFilesAre0600() async throws {
        let root = TestDirectories.root.appendingPathComponent("sqlite-perm-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let directory = root.appendingPathComponent("state")
        let path = directory.appendingPathComponent("gateway.sqlite").path
        do {
            let store = try await SQLiteGatewayStore.open(path: path)
            try await store.migrate()
            try await store.putCard(StoreConformance.card("private"))
            #expect(try await store.card("private") != nil)
            #expect(try mode(root.path) == 0o700, "every directory the store creates")
            #expect(try mode(directory.path) == 0o700)
            for file in [path, path + "-wal", path + "-shm"] {
                #expect(FileManager.default.fileExists(atPath: file), "\(file)")
                #expect(try mode(file) == 0o600, "\(file)")
            }
        }
    }

    @Test func anExistingLooseDatabaseIsTightenedAndAnExistingDirectoryLeftAlone() async throws {
        let directory = TestDirectories.root.appendingPathComponent("sqlite-perm-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: directory.path)
        let path = directory.appendingPathComponent("gateway.sqlite").path
        do {
            // The first store stays open, so its -wal and -shm files exist (SQLite deletes them on
            // the last close) and are loosened with the database itself.
            let store = try await SQLiteGatewayStore.open(path: path)
            try await store.migrate()
            try await store.putCard(StoreConformance.card("before"))
            for file in [path, path + "-wal", path + "-shm"] {
                #expect(FileManager.default.fileExists(atPath: file), "\(file)")
                try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: file)
            }
            let reopened = try await SQLiteGatewayStore.open(path: path)
            try await reopened.putCard(StoreConformance.card("after"))
            for file in [path, path + "-wal", path + "-shm"] {
                #expect(try mode(file) == 0o600, "\(file)")
            }
            // A directory the store did not create may be shared (/var/lib): not its to change.
            #expect(try mode(directory.path) == 0o755)
            _ = store
        }
    }
}
