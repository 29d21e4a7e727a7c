import Tracing

/// The W3C trace context headers (`traceparent`, `tracestate`) as a tracer injects or extracts
/// them: what an attempt sends upstream, and the only headers of a caller's request a tracer reads
/// (swift-otel logs the whole carrier when it cannot parse one, and a request's other headers hold
/// its API key).
public struct TraceHeaders: Sendable {
    public static let names = ["traceparent", "tracestate"]
    public private(set) var fields: [(name: String, value: String)] = []

    public init() {}

    /// The trace context headers among `headers` (name, value), first value of each.
    public init(from headers: [(name: String, value: String)]) {
        for name in Self.names {
            if let value = headers.first(where: { $0.name.lowercased() == name })?.value { fields.append((name, value)) }
        }
    }

    public subscript(name: String) -> String? {
        fields.last { $0.name.lowercased() == name.lowercased() }?.value
    }

    public struct Injector: Tracing.Injector {
        public init() {}
        public func inject(_ value: String, forKey key: String, into carrier: inout TraceHeaders) {
            carrier.fields.removeAll { $0.name.lowercased() == key.lowercased() }
            carrier.fields.append((key, value))
        }
    }

    public struct Extractor: Tracing.Extractor {
        public init() {}
        public func extract(key: String, from carrier: TraceHeaders) -> String? { carrier[key] }
    }
}

/// The W3C ids of a span, as log lines carry them (`trace_id`, `span_id`): read back from the
/// `traceparent` the tracer would send for it, so any W3C tracer will do. Nil for a tracer that
/// writes no `traceparent`.
public struct TraceIdentity: Sendable, Equatable {
    public let traceID: String
    public let spanID: String

    /// `version-traceid-spanid-flags`, lowercase hex of 32 and 16 digits.
    public init?(traceparent: String) {
        let parts = traceparent.split(separator: "-", omittingEmptySubsequences: false)
        func isLowercaseHex(_ part: Substring, count: Int) -> Bool {
            part.utf8.count == count && part.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
        }
        guard parts.count >= 4, isLowercaseHex(parts[1], count: 32), isLowercaseHex(parts[2], count: 16) else { return nil }
        traceID = String(parts[1])
        spanID = String(parts[2])
    }

    public init?(_ context: InstrumentationContext, tracer: any Tracer) {
        var headers = TraceHeaders()
        tracer.inject(context, into: &headers, using: TraceHeaders.Injector())
        guard let traceparent = headers["traceparent"] else { return nil }
        self.init(traceparent: traceparent)
    }
}
