import Foundation
import ProvisioningCore
import Testing

@Suite struct ConfigKeyShapeTests {
    @Test func absentOptionalsAndDefaultsKeepTheirKeys() throws {
        let shape = try ConfigKeyShape(of: ServerConfig())
        guard case .mapping(let keys, let values) = shape else { Issue.record("not a mapping: \(shape)"); return }
        #expect(keys == ["host", "port", "max_body_bytes", "deadline_ms", "tls", "allow_plaintext", "metrics_public", "idle_timeout_ms",
                         "read_timeout_ms", "write_timeout_ms", "max_connections", "auth_failure_limit", "shutdown_delay_ms", "shutdown_timeout_ms"])
        #expect(values["auth_failure_limit"] == .mapping(keys: ["requests_per_second", "burst"], values: ["requests_per_second": .number, "burst": .number]))
        #expect(values["tls"] == .scalar)
        // Numbers are told apart (for the check of numbers in another base), absent ones too.
        #expect(values["deadline_ms"] == .number && values["shutdown_timeout_ms"] == .number && values["host"] == .scalar)
    }

    @Test func listsAndFreeFormMapsFollowTheValue() throws {
        var retry = RetryConfig()
        retry.decisions = [RetryDecisionConfig(on: "500", action: .fail)]
        guard case .mapping(_, let values) = try ConfigKeyShape(of: retry), case .list(let rows)? = values["decisions"] else {
            Issue.record("no decisions list"); return
        }
        #expect(rows == [.mapping(keys: ["on", "action", "code"], values: ["on": .scalar, "action": .scalar, "code": .scalar])])
        #expect(try ConfigKeyShape(of: ["b": "1", "a": "2"]).keys == ["a", "b"])
    }
}

private extension ConfigKeyShape {
    var keys: [String] {
        if case .mapping(let keys, _) = self { return keys.sorted() }
        return []
    }
}
