import Foundation
import GatewayStore
import GRDB
import ProvisioningCore
import Testing

@Suite struct SQLiteGatewayStoreTests {
    func withStore(_ body: (SQLiteGatewayStore) async throws -> Void) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("sqlite-store-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        try await body(try SQLiteGatewayStore(path: directory.appendingPathComponent("gateway.sqlite").path))
    }

    @Test(arguments: StoreConformance.all)
    func conforms(_ scenario: StoreScenario) async throws { try await withStore(scenario.run) }

    @Test func theFileIsInWALModeAndSurvivesReopening() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("sqlite-store-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("nested/gateway.sqlite").path
        do {
            let store = try SQLiteGatewayStore(path: path)
            try await store.migrate()
            try await store.putCard(StoreConformance.card("kept"))
        }
        let journalMode = try await DatabaseQueue(path: path).read { db in try String.fetchOne(db, sql: "PRAGMA journal_mode") }
        #expect(journalMode == "wal")
        let reopened = try SQLiteGatewayStore(path: path)
        try await reopened.migrate()
        #expect(try await reopened.card("kept") == StoreConformance.card("kept"))
    }

    @Test func anUnopenableFileNamesTheStore() throws {
        let path = "/proc/no-such-dir/gateway.sqlite"
        let error = try #require(throws: StoreError.self) { try SQLiteGatewayStore(path: path) }
        // The message an operator reads names the kind of store and the file, and says what failed.
        #expect(error.store == "sqlite \(path)")
        #expect(error.description.hasPrefix("sqlite \(path): cannot open the database"), "\(error)")
    }
}
