import Foundation
import ProvisioningCore
import Testing

@Suite struct ConfigDefaultTests {
    @Test func absentKeysTakeTheirDefaultsAndPresentOnesWin() throws {
        let server = try JSONDecoder().decode(ServerConfig.self, from: Data(#"{"port": 9000, "tls": null}"#.utf8))
        #expect(server.port == 9000)
        #expect(server.host == "127.0.0.1" && server.deadlineMS == 15_000 && !server.allowPlaintext)
        #expect(server.authFailureLimit == RateLimitConfig.authFailureDefault)
        let fault = try JSONDecoder().decode(SandboxFaultConfig.self, from: Data(#"{"issuer": "bridge", "mode": "reset"}"#.utf8))
        #expect(fault == SandboxFaultConfig(issuer: "bridge", mode: .reset, count: 1, endpoint: 0))
    }

    @Test func aWrongWordThrowsWithoutTheLoadersCollector() {
        #expect(throws: DecodingError.self) {
            try JSONDecoder().decode(SandboxFaultConfig.self, from: Data(#"{"issuer": "bridge", "mode": "flaky"}"#.utf8))
        }
    }
}
