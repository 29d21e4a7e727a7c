import Foundation
import GatewayTestSupport
import Testing

/// `config check` on the `telemetry` section, run as the real executable.
@Suite struct TelemetryCommandLineTests {
    @Test func configCheckNamesABadOTLPEndpointAndAnUnknownTelemetryKey() async throws {
        let file = try CommandLineTests.writeConfig(CommandLineTests.productionYAML + """

            telemetry:
              otlp: { endpoint: "otel-collector:4318" }
              exporter: otlp
            """)
        defer { try? FileManager.default.removeItem(at: file) }
        let run = try await CommandLineTests.run(["config", "check", "--config", file.path])
        #expect(run.status == 2, "\(run.stdout)\(run.stderr)")
        #expect(run.stderr.contains("telemetry.exporter: unknown key (expected one of: service_name, otlp)"), "\(run.stderr)")
        #expect(run.stderr.contains("telemetry.otlp.endpoint: not an http:// or https:// URL"), "\(run.stderr)")
    }

    @Test func configCheckSaysWhereTracesGo() async throws {
        let unset = try await CommandLineTests.run(["config", "check", "--config", "Config/gateway.yaml"])
        #expect(unset.status == 0, "\(unset.stderr)")
        #expect(unset.stdout.contains("traces: W3C trace context propagated, not exported"), "\(unset.stdout)")
    }
}
