import Foundation
import Gateway
import GatewayServer
import GatewayTestSupport
import HTTPTypes
import Hummingbird
import InMemoryTracing
import Logging
import NIOCore
import ServiceLifecycle
import Testing
import Tracing

/// Distributed tracing: a server span per request and a client span per upstream attempt, with the
/// attempt's bookkeeping and never card data; the caller's W3C trace context continued to the
/// upstream on every attempt (with the tracer `telemetry` configures, no exporter); the trace id
/// on the request's JSON log lines; spans exported over OTLP/HTTP when an endpoint is set.
struct TracingTests {
    static let traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
    static let callerSpanID = "00f067aa0ba902b7"
    static let traceparent = "00-\(traceID)-\(callerSpanID)-01"
    static let route = "/v1/cards/{card_id}/wallet-provisioning/apple-pay"

    static func provision(
        _ client: GatewayClient, card: String = "card_bridge_demo", traceparent: String? = nil, tracestate: String? = nil,
        requestID: String? = nil
    ) async throws -> GatewayResponse {
        var headers: HTTPFields = [.contentType: "application/json", .authorization: "Bearer \(GatewayHarness.demoKey)"]
        if let traceparent { headers[HTTPField.Name("traceparent")!] = traceparent }
        if let tracestate { headers[HTTPField.Name("tracestate")!] = tracestate }
        if let requestID { headers[HTTPField.Name("X-Request-Id")!] = requestID }
        return try await client.execute(
            uri: "/v1/cards/\(card)/wallet-provisioning/apple-pay", method: .post, headers: headers,
            body: ByteBuffer(bytes: try GatewayHarness.requestBody()))
    }

    static func attemptSpans(_ tracer: InMemoryTracer) -> [FinishedInMemorySpan] {
        tracer.finishedSpans.filter { $0.operationName == "upstream attempt" }
            .sorted { ($0.attributes.get("gateway.attempt").map { "\($0)" } ?? "") < ($1.attributes.get("gateway.attempt").map { "\($0)" } ?? "") }
    }

    /// Every name and attribute value of every span, as text.
    static func spanText(_ tracer: InMemoryTracer) -> [String] {
        tracer.finishedSpans.flatMap { span in
            var texts = [span.operationName, span.status.map { "\($0)" } ?? ""]
            span.attributes.forEach { key, value in texts.append("\(key)=\(value)") }
            return texts
        }
    }

    @Test func aProvisioningIsARequestSpanWithItsAttemptSpanAsAChild() async throws {
        let tracer = InMemoryTracer()
        let answer = Locked<[String]>([])
        try await GatewayHarness.run(tracing: GatewayTracing(tracer: tracer)) { client, _ in
            let response = try await Self.provision(client)
            #expect(response.status == .ok)
            let json = response.json
            answer.withLock { $0 = ["activation_data", "encrypted_pass_data", "ephemeral_public_key"].compactMap { json[$0] as? String } }
        }
        let requests = tracer.finishedSpans.filter { $0.kind == .server }
        #expect(requests.count == 1, "\(tracer.finishedSpans.map(\.operationName))")
        let request = try #require(requests.first)
        #expect(request.operationName == "POST \(Self.route)")
        #expect(request.attributes.get("http.route") == .string(Self.route))
        #expect(request.attributes.get("http.request.method") == .string("POST"))
        #expect(request.attributes.get("http.response.status_code") == .int64(200))

        let attempts = Self.attemptSpans(tracer)
        #expect(attempts.count == 1)
        let attempt = try #require(attempts.first)
        #expect(attempt.kind == .client)
        #expect(attempt.traceID == request.traceID)
        #expect(attempt.parentSpanID == request.spanID)
        #expect(attempt.attributes.get("gateway.issuer") == .string("bridge"))
        #expect(attempt.attributes.get("gateway.attempt") == .int64(1))
        #expect(attempt.attributes.get("gateway.outcome") == .string("succeeded"))
        #expect(attempt.attributes.get("http.response.status_code") == .int64(200))
        guard case .string(let endpoint)? = attempt.attributes.get("gateway.endpoint") else {
            Issue.record("no gateway.endpoint: \(attempt.attributes)")
            return
        }
        #expect(endpoint.hasPrefix("http://127.0.0.1:"), "\(endpoint)")
        #expect(!endpoint.contains("@") && !endpoint.contains("?"), "\(endpoint)")

        // Nothing of the card, the wallet request or the answer is in a span.
        let request_ = try GatewayHarness.requestJSON()
        var secrets = ["card_bridge_demo", "4111111111111111", "cust_demo_001", "ca_demo_001"]
        secrets += (request_["certificates"] as? [String] ?? []) + [request_["nonce"], request_["nonce_signature"]].compactMap { $0 as? String }
        secrets += answer.withLock { $0 }
        #expect(secrets.count >= 10, "the request and answer fixtures lost fields: \(secrets.count)")
        let texts = Self.spanText(tracer)
        for secret in secrets {
            #expect(!texts.contains { $0.contains(secret) }, "a span holds \(secret.prefix(12))...: \(texts)")
        }
    }

    /// One provisioning that Bridge answers 503 once, then 200 (two attempts), under `tracer`;
    /// the `traceparent` of each request Bridge saw.
    static func retriedProvisioning(tracer: any Tracer) async throws -> [String?] {
        let seen = Locked<[String?]>([])
        try await GatewayHarness.run(config: try ResilienceTests.config(), tracing: GatewayTracing(tracer: tracer)) { client, sandbox in
            try await ResilienceTests.addFault(client, #"{"issuer":"bridge","mode":"unavailable","count":1}"#)
            let response = try await Self.provision(client)
            #expect(response.status == .ok)
            let requests = await sandbox.bridge.log.requests
            seen.withLock { $0 = requests.map(\.traceparent) }
        }
        return seen.withLock { $0 }
    }

    @Test func aRetriedProvisioningHasOneSpanPerAttemptWithItsOutcome() async throws {
        let tracer = InMemoryTracer()
        _ = try await Self.retriedProvisioning(tracer: tracer)
        let request = try #require(tracer.finishedSpans.first { $0.kind == .server && $0.operationName == "POST \(Self.route)" })
        let attempts = Self.attemptSpans(tracer)
        #expect(attempts.map { $0.attributes.get("gateway.attempt") } == [.int64(1), .int64(2)])
        #expect(attempts.map { $0.attributes.get("gateway.outcome") } == [.string("upstream_unavailable"), .string("succeeded")])
        #expect(attempts.map { $0.attributes.get("http.response.status_code") } == [.int64(503), .int64(200)])
        #expect(attempts.allSatisfy { $0.parentSpanID == request.spanID && $0.traceID == request.traceID })
        #expect(attempts.first?.status?.code == .error)
        let texts = Self.spanText(tracer)
        #expect(!texts.contains { $0.contains("card_bridge_demo") }, "\(texts)")
    }

    @Test func theCallersTraceReachesTheUpstreamOnEveryAttempt() async throws {
        try await GatewayHarness.run(config: try ResilienceTests.config()) { client, sandbox in
            try await ResilienceTests.addFault(client, #"{"issuer":"bridge","mode":"unavailable","count":1}"#)
            let response = try await Self.provision(client, traceparent: Self.traceparent, tracestate: "vendor=opaque")
            #expect(response.status == .ok)
            let seen = await sandbox.bridge.log.requests
            #expect(seen.count == 2, "a 503 and a retry: \(seen)")
            let identities = seen.map { $0.traceparent.flatMap(TraceIdentity.init(traceparent:)) }
            for (request, identity) in zip(seen, identities) {
                #expect(identity?.traceID == Self.traceID, "\(request.traceparent ?? "no traceparent")")
                #expect(identity?.spanID != Self.callerSpanID, "the upstream must see the attempt's span, not the caller's")
                #expect(request.tracestate == "vendor=opaque")
                // The caller sampled its trace: the gateway follows its flag.
                #expect(request.traceparent?.hasSuffix("-01") == true, "\(request.traceparent ?? "no traceparent")")
            }
            #expect(Set(identities.compactMap { $0?.spanID }).count == 2, "one span per attempt: \(seen.map(\.traceparent))")
        }
    }

    /// A malformed `traceparent` (here 4,000 characters) is neither followed, nor logged, nor
    /// passed on: the upstream gets a new trace of the gateway's own, without the `tracestate`.
    @Test func aMalformedTraceparentIsNeitherLoggedNorPassedOn() async throws {
        let captured = CapturedLog()
        let logger = Logger(label: "gateway-tests") { captured.handler(label: $0) }
        let junk = "00-" + String(repeating: "f", count: 3_997)
        try await GatewayHarness.run(logger: logger) { client, sandbox in
            let response = try await Self.provision(client, traceparent: junk, tracestate: "vendor=opaque")
            #expect(response.status == .ok)
            let seen = try #require(await sandbox.bridge.log.requests.first)
            #expect(seen.traceparent.flatMap(TraceIdentity.init(traceparent:)) != nil)
            #expect(seen.traceparent != junk && seen.tracestate == nil)
        }
        #expect(!captured.text.contains(String(repeating: "f", count: 64)), "the header reached the log")
    }

    @Test func withoutATraceparentTheUpstreamStillGetsANewTrace() async throws {
        try await GatewayHarness.run { client, sandbox in
            for _ in 0..<2 {
                let response = try await Self.provision(client)
                #expect(response.status == .ok)
            }
            let seen = await sandbox.bridge.log.requests
            #expect(seen.count == 2)
            let traces = seen.compactMap { $0.traceparent.flatMap(TraceIdentity.init(traceparent:))?.traceID }
            #expect(traces.count == 2, "\(seen.map(\.traceparent))")
            #expect(Set(traces).count == 2, "two requests, two traces: \(traces)")
            #expect(!traces.contains(String(repeating: "0", count: 32)))
            // No collector is configured, so the gateway's own new traces are not sampled (nothing
            // records them), and the traceparent says so.
            #expect(seen.allSatisfy { $0.traceparent?.hasSuffix("-00") == true }, "\(seen.map(\.traceparent))")
        }
    }

    @Test func aRequestsJSONLogLinesCarryTheCallersTraceID() async throws {
        let (lines, logger) = JSONLogTests.capturing()
        let served = Locked<[String]>([])
        try await GatewayHarness.run(logger: logger) { client, _ in
            let before = lines.withLock { $0.count }
            let response = try await Self.provision(client, traceparent: Self.traceparent, requestID: "req_traced_1")
            #expect(response.status == .ok)
            served.withLock { $0 = lines.withLock { Array($0.dropFirst(before)) } }
        }
        let captured = served.withLock { $0 }
        #expect(captured.contains { $0.contains("upstream answered") } && captured.contains { $0.contains("apple_pay succeeded") },
                "\(captured)")
        for line in captured {
            let object = try JSONLogTests.object(line)
            #expect(object["request_id"] as? String == "req_traced_1", "\(line)")
            #expect(object["trace_id"] as? String == Self.traceID, "\(line)")
            let spanID = try #require(object["span_id"] as? String, "\(line)")
            #expect(spanID.count == 16 && spanID != Self.callerSpanID, "\(line)")
        }
    }

    /// A collector on a loopback port, recording what is posted to it.
    struct Collector {
        struct Export: Sendable {
            let path: String
            let contentType: String?
            let body: Data
        }

        static func with(_ body: @escaping @Sendable (Int, Locked<[Export]>) async throws -> Void) async throws {
            let exports = Locked<[Export]>([])
            let router = Router()
            router.post("/v1/traces") { request, _ -> Response in
                let bytes = try await request.body.collect(upTo: 1 << 20)
                exports.withLock { $0.append(Export(path: request.uri.path, contentType: request.headers[.contentType], body: Data(buffer: bytes))) }
                // An empty ExportTraceServiceResponse: full success.
                return Response(status: .ok, headers: [.contentType: "application/x-protobuf"])
            }
            let (ports, announce) = AsyncStream.makeStream(of: Int.self)
            let app = Application(
                router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
                onServerRunning: { announce.yield($0.localAddress?.port ?? 0) }, logger: GatewayHarness.logger)
            let group = ServiceGroup(configuration: .init(services: [app], logger: GatewayHarness.logger))
            try await withThrowingTaskGroup(of: Void.self) { tasks in
                tasks.addTask { try await group.run() }
                var announced = ports.makeAsyncIterator()
                let port = try #require(await announced.next())
                do {
                    try await body(port, exports)
                } catch {
                    await group.triggerGracefulShutdown()
                    throw error
                }
                await group.triggerGracefulShutdown()
                try await tasks.waitForAll()
            }
        }
    }

    @Test func spansAreExportedOverOTLPHTTPWhenAnEndpointIsSet() async throws {
        try await Collector.with { port, exports in
            var config = try GatewayHarness.sandboxConfig()
            config.telemetry.otlp.endpoint = "http://127.0.0.1:\(port)"
            try await GatewayHarness.run(config: config) { client, _ in
                let response = try await Self.provision(client, traceparent: Self.traceparent)
                #expect(response.status == .ok)
            }
            // The gateway's shutdown flushed its spans before it returned.
            let received = exports.withLock { $0 }
            #expect(!received.isEmpty, "nothing was exported")
            #expect(received.allSatisfy { $0.path == "/v1/traces" && $0.contentType == "application/x-protobuf" })
            let all = received.reduce(Data()) { $0 + $1.body }
            #expect(all.range(of: Self.traceBytes) != nil, "the caller's trace id is not in the exported spans")
            #expect(all.range(of: Data(Self.route.utf8)) != nil, "the request span is not among the exported spans")
            #expect(all.range(of: Data("card_bridge_demo".utf8)) == nil, "an exported span names the card")
        }
    }
}

extension TracingTests {
    /// The caller's trace id as the 16 bytes an OTLP protobuf body carries.
    static let traceBytes = Data(stride(from: 0, to: 32, by: 2).map { offset in
        let start = traceID.index(traceID.startIndex, offsetBy: offset)
        return UInt8(traceID[start..<traceID.index(start, offsetBy: 2)], radix: 16)!
    })

    /// A request cut off at the stop's timeout (Bridge holds its answer) still has its span
    /// exported: the exporter runs on past the cancellation and stops last, once every other
    /// service has returned. Cancelled with the rest, its last export had been cancelled too, and
    /// the spans of the cut-off requests, the ones that say why the stop ran late, were lost.
    @Test func theSpanOfARequestCutOffAtTheStopIsExported() async throws {
        try await Collector.with { port, exports in
            var config = try GatewayHarness.sandboxConfig()
            config.telemetry.otlp.endpoint = "http://127.0.0.1:\(port)"
            config.server.shutdownTimeoutMS = 300
            // The group cancelled at its timeout ends with CancellationError: that is the stop meant.
            do {
                try await GatewayHarness.run(config: config) { client, sandbox in
                    try await ResilienceTests.addFault(client, #"{"issuer":"bridge","mode":"timeout","count":1,"delay_ms":20000}"#)
                    let before = await sandbox.bridge.log.count
                    let gatewayPort = client.port
                    // On a connection of its own, with the caller's trace; its answer comes after the stop began.
                    Task {
                        _ = try? await GatewayClient.with(port: gatewayPort) { other in
                            try await Self.provision(other, traceparent: Self.traceparent)
                        }
                    }
                    for _ in 0..<1000 where await sandbox.bridge.log.count <= before { try await Task.sleep(for: .milliseconds(5)) }
                    try #require(await sandbox.bridge.log.count > before, "the request never reached Bridge")
                    // Returning stops the gateway: 300 ms later the request is cancelled.
                }
            } catch is CancellationError {}
            let all = exports.withLock { $0 }.reduce(Data()) { $0 + $1.body }
            #expect(all.range(of: Self.traceBytes) != nil, "the cut-off request's span was not exported")
        }
    }

    /// A collector that is down costs the requests nothing, and the shutdown's flush gives up.
    @Test func anUnreachableCollectorFailsNoRequest() async throws {
        var config = try GatewayHarness.sandboxConfig()
        // Port 1 on loopback: nothing listens there, the connection is refused at once.
        config.telemetry.otlp.endpoint = "http://127.0.0.1:1"
        try await GatewayHarness.run(config: config) { client, sandbox in
            let response = try await Self.provision(client, traceparent: Self.traceparent)
            #expect(response.status == .ok)
            #expect(await sandbox.bridge.log.requests.first?.traceparent.flatMap(TraceIdentity.init(traceparent:))?.traceID == Self.traceID)
        }
        // The shutdown ended (the harness returned): the exporter's last flush gave up within the
        // group's shutdown budget. No time bound: in a loaded full test run the exporter's 10 s
        // timeout and start-up together took over 20 s.
    }
}

extension TracingTests {
    /// A `traceparent` that is not W3C starts a new trace. It is dropped before the tracer reads it,
    /// so nothing a caller wrote there (read before it is authenticated) reaches the log, and
    /// neither does the request's API key.
    @Test func aMalformedTraceparentStartsANewTraceAndLogsNoKey() async throws {
        let captured = CapturedLog()
        let logger = Logger(label: "gateway-tests") { captured.handler(label: $0) }
        try await GatewayHarness.run(logger: logger) { client, sandbox in
            let response = try await Self.provision(client, traceparent: "00-not-a-trace-01")
            #expect(response.status == .ok)
            let seen = await sandbox.bridge.log.requests
            let identity = try #require(seen.first?.traceparent.flatMap(TraceIdentity.init(traceparent:)), "\(seen)")
            #expect(identity.traceID != Self.traceID)
        }
        #expect(!captured.text.contains("00-not-a-trace-01"), "the caller's header reached the log")
        #expect(!captured.text.contains(GatewayHarness.demoKey), "a log line holds the API key")
    }
}

/// Spans that record nothing (what swift-otel gives for a trace that is not sampled, so for every
/// span without a collector) are given no attributes: building each one (a boxed value in a
/// dictionary the span drops) is work on every request for nothing. Their context still travels
/// (`TracingTests.withoutATraceparentTheUpstreamStillGetsANewTrace`, on swift-otel's unsampled spans).
struct UnsampledSpanTests {
    /// Wraps `InMemoryTracer` (for its ids and W3C propagation) and hands out spans that say they
    /// record nothing and count what is still written to them.
    final class UnsampledTracer: Tracer {
        let inner = InMemoryTracer()
        let attributeWrites = Locked(0)
        let ended = Locked(0)

        final class UnsampledSpan: Tracing.Span {
            let inner: InMemorySpan
            let tracer: UnsampledTracer
            init(_ inner: InMemorySpan, tracer: UnsampledTracer) {
                self.inner = inner
                self.tracer = tracer
            }
            var context: InstrumentationContext { inner.context }
            var operationName: String {
                get { inner.operationName }
                set { inner.operationName = newValue }
            }
            var isRecording: Bool { false }
            var attributes: SpanAttributes {
                get { [:] }
                set { tracer.attributeWrites.withLock { $0 += 1 } }
            }
            func setStatus(_ status: SpanStatus) {}
            func addEvent(_ event: SpanEvent) {}
            func recordError<Instant: TracerInstant>(_ error: any Error, attributes: SpanAttributes, at instant: @autoclosure () -> Instant) {}
            func addLink(_ link: SpanLink) {}
            func end<Instant: TracerInstant>(at instant: @autoclosure () -> Instant) {
                tracer.ended.withLock { $0 += 1 }
            }
        }

        func startSpan<Instant: TracerInstant>(
            _ operationName: String, context: @autoclosure () -> InstrumentationContext, ofKind kind: SpanKind,
            at instant: @autoclosure () -> Instant, function: String, file fileID: String, line: UInt
        ) -> UnsampledSpan {
            UnsampledSpan(inner.startSpan(operationName, context: context(), ofKind: kind, at: instant(), function: function,
                                          file: fileID, line: line), tracer: self)
        }

        func forceFlush() {}

        func extract<Carrier, Extract>(_ carrier: Carrier, into context: inout InstrumentationContext, using extractor: Extract)
        where Extract: Extractor, Extract.Carrier == Carrier {
            inner.extract(carrier, into: &context, using: extractor)
        }

        func inject<Carrier, Inject>(_ context: InstrumentationContext, into carrier: inout Carrier, using injector: Inject)
        where Inject: Injector, Inject.Carrier == Carrier {
            inner.inject(context, into: &carrier, using: injector)
        }
    }

    @Test func aSpanThatRecordsNothingIsGivenNoAttributes() async throws {
        let tracer = UnsampledTracer()
        // A retried provisioning: two attempt spans, one of them failed, and the request's span.
        let seen = try await TracingTests.retriedProvisioning(tracer: tracer)
        #expect(seen.count == 2, "a 503 and a retry: \(seen)")
        #expect(tracer.ended.withLock { $0 } >= 3, "the request's span and its two attempts' spans were not all ended")
        #expect(tracer.attributeWrites.withLock { $0 } == 0, "attributes were built for spans that record nothing")
    }
}
