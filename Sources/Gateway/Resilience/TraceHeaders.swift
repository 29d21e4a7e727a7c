import Tracing

/// The W3C trace context headers (`traceparent`, `tracestate`) as a tracer injects or extracts
/// them: what an attempt sends upstream, and the only headers of a caller's request a tracer reads
/// (swift-otel logs the whole carrier when it cannot parse one, and a request's other headers hold
/// its API key).
public struct TraceHeaders: Sendable {
    public static let names = ["traceparent", "tracestate"]
    public private(set) var fields: [(name: String, value: String)] = []

    public init() {}

    /// The most a caller's `tracestate` may hold to be passed on: W3C's 32 list members, in at
    /// most 512 bytes (the length W3C lets any hop cut it to).
    public static let maxTraceStateBytes = 512
    public static let maxTraceStateMembers = 32

    /// The trace context headers among `headers` (name, value), first value of each, as a caller
    /// sent them: kept only when well-formed and bounded, since they are read before the caller is
    /// authenticated, reach the tracer (which logs what it cannot parse) and are passed on to every
    /// upstream. A `traceparent` other than W3C's 55-character form is dropped with its
    /// `tracestate` (which means nothing without it); an oversized `tracestate` is dropped alone.
    public init(from headers: [(name: String, value: String)]) {
        func first(_ name: String) -> String? { headers.first(where: { $0.name.lowercased() == name })?.value }
        guard let traceparent = first("traceparent"), traceparent.utf8.count == 55, TraceIdentity(traceparent: traceparent) != nil,
              traceparent.utf8.allSatisfy({ $0 == UInt8(ascii: "-") || (0x30...0x39).contains($0) || (0x61...0x66).contains($0) })
        else { return }
        fields.append(("traceparent", traceparent))
        if let tracestate = first("tracestate"), tracestate.utf8.count <= Self.maxTraceStateBytes,
           tracestate.utf8.lazy.filter({ $0 == UInt8(ascii: ",") }).count < Self.maxTraceStateMembers {
            fields.append(("tracestate", tracestate))
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
