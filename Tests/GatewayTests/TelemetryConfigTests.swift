import Foundation
import Gateway
import ProvisioningCore
import Testing

/// `telemetry`: the OTLP endpoint is a base http(s) URL, named by its key path when it is not;
/// unknown keys under the section are refused like anywhere else.
@Suite struct TelemetryConfigTests {
    func problems(_ yaml: String) -> [String] { ConfigLoaderTests().problems(yaml) }

    func telemetry(_ section: String) -> String { ConfigLoaderTests.minimal + "\ntelemetry:\n" + section }

    @Test func withoutTheSectionNothingIsExportedUnderTheDefaultServiceName() throws {
        let config = try ConfigLoader.parse(yaml: ConfigLoaderTests.minimal, source: "t.yaml")
        #expect(config.telemetry.otlp.endpoint == nil)
        #expect(config.telemetry.serviceName == "provisioning-gateway")
    }

    @Test func anOTLPEndpointAndServiceNameAreRead() throws {
        let config = try ConfigLoader.parse(
            yaml: telemetry("  service_name: gateway-eu\n  otlp: { endpoint: \"http://otel-collector:4318\" }\n"), source: "t.yaml")
        #expect(config.telemetry.otlp.endpoint == "http://otel-collector:4318")
        #expect(config.telemetry.serviceName == "gateway-eu")
        #expect(problems(telemetry("  otlp: { endpoint: \"https://collector.example.com\" }\n")) == [])
    }

    @Test func aBadEndpointIsAProblemAtItsKeyPath() {
        for bad in ["not a url", "collector:4318", "ftp://collector:4318", "http://", "grpc://collector:4317"] {
            #expect(problems(telemetry("  otlp: { endpoint: \"\(bad)\" }\n"))
                == ["telemetry.otlp.endpoint: not an http:// or https:// URL (e.g. http://otel-collector:4318)"], "\(bad)")
        }
        #expect(problems(telemetry("  otlp: { endpoint: \"https://user:secret@collector.example.com\" }\n"))
            == ["telemetry.otlp.endpoint: must not hold user info"])
        #expect(problems(telemetry("  otlp: { endpoint: \"http://collector:4318?token=x\" }\n"))
            == ["telemetry.otlp.endpoint: must not hold a query or fragment"])
        #expect(problems(telemetry("  service_name: \" \"\n")) == ["telemetry.service_name: must not be empty"])
    }

    @Test func unknownKeysUnderTelemetryAreRefused() {
        #expect(problems(telemetry("  otlp: { endpoint: \"http://collector:4318\", protocol: grpc }\n  sampler: always_on\n")) == [
            "telemetry.otlp.protocol: unknown key (expected one of: endpoint)",
            "telemetry.sampler: unknown key (expected one of: service_name, otlp)",
        ])
    }
}
