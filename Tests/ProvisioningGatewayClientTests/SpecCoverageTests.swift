import Foundation
import Testing

extension ClientSuites {
    /// Every operation of the spec has a round trip in this target: a new operationId in openapi.yaml
    /// fails here until a test calls it and is listed below.
    @Suite struct SpecCoverageTests {
        static let covered: Set<String> = [
            "provisionApplePay", "provisionGooglePay", "provisionSamsungPay", "listWalletTokens", "suspendWalletToken",
            "resumeWalletToken", "deactivateWalletToken", "activateToken", "putCard", "getCard", "deleteCard", "listCards",
            "getProvisioning", "addSandboxFault", "listSandboxFaults", "clearSandboxFaults", "listIssuerHealth", "pauseIssuer",
            "resumeIssuer", "reloadConfig", "explainRoute", "listSecurityEvents", "getMetrics", "getHealth", "getReadiness",
            "getContract",
        ]

        @Test func everyOperationOfTheSpecIsCovered() throws {
            // The client target's openapi.yaml is the symlink: reading it checks that it resolves too.
            let spec = try String(contentsOf: SandboxServer.packageRoot.appendingPathComponent("Sources/ProvisioningGatewayClient/openapi.yaml"),
                                  encoding: .utf8)
            let server = try String(contentsOf: SandboxServer.packageRoot.appendingPathComponent("Sources/ProvisioningAPI/openapi.yaml"),
                                    encoding: .utf8)
            #expect(spec == server)
            let ids = Set(spec.split(separator: "\n").compactMap { line -> String? in
                let text = line.trimmingCharacters(in: .whitespaces)
                guard text.hasPrefix("operationId:") else { return nil }
                return text.dropFirst("operationId:".count).trimmingCharacters(in: .whitespaces)
            })
            #expect(ids.count == 26)
            #expect(ids.subtracting(Self.covered).sorted() == [], "operations without a client test")
            #expect(Self.covered.subtracting(ids).sorted() == [], "listed but not in the spec")
        }
    }
}
