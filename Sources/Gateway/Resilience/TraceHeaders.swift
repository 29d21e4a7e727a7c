import ProvisioningCore
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
        guard let traceparent = first("traceparent"), Self.isVersion00(traceparent) else { return }
        fields.append(("traceparent", traceparent))
        if let tracestate = first("tracestate").flatMap(Self.boundedTraceState) { fields.append(("tracestate", tracestate)) }
    }

    /// W3C's version 00: `00-<32 hex>-<16 hex>-<2 hex>`, lowercase, ids not all zero.
    static func isVersion00(_ value: String) -> Bool {
        let bytes = Array(value.utf8)
        guard bytes.count == 55, bytes[0] == UInt8(ascii: "0"), bytes[1] == UInt8(ascii: "0") else { return false }
        let dashes = [2, 35, 52]
        for (index, byte) in bytes.enumerated() {
            let isHex = (0x30...0x39).contains(byte) || (0x61...0x66).contains(byte)
            guard dashes.contains(index) ? byte == UInt8(ascii: "-") : isHex else { return false }
        }
        return bytes[3..<35].contains { $0 != UInt8(ascii: "0") } && bytes[36..<52].contains { $0 != UInt8(ascii: "0") }
    }

    /// A `tracestate` worth passing on: at most 512 bytes and 32 members, each member W3C's
    /// `key=value` (empty members and the blanks around members dropped), or nil: one malformed
    /// member drops the whole header, which then never costs the caller its `traceparent`.
    /// One that holds what reads as a card number is dropped too: the span exports it and every
    /// issuer is sent it.
    static func boundedTraceState(_ value: String) -> String? {
        guard value.utf8.count <= maxTraceStateBytes, !InputRules.holdsCardNumber(value) else { return nil }
        let members = value.split(separator: ",", omittingEmptySubsequences: false)
            .map { $0.trimmingCharacters(in: [" ", "\t"]) }
            .filter { !$0.isEmpty }
        guard !members.isEmpty, members.count <= maxTraceStateMembers, members.allSatisfy(isTraceStateMember) else { return nil }
        return members.joined(separator: ",")
    }

    /// `key=value`: the key a lowercase simple key (`[a-z][a-z0-9_*/-]{0,255}`) or a multi-tenant
    /// one (`[a-z0-9][a-z0-9_*/-]{0,240}@[a-z][a-z0-9_*/-]{0,13}`); the value 1-256 printable ASCII
    /// characters other than `,` and `=`, not ending in a space.
    static func isTraceStateMember(_ member: String) -> Bool {
        let parts = member.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2 else { return false }
        let key = Array(parts[0].utf8), value = Array(parts[1].utf8)
        func isKeyByte(_ byte: UInt8) -> Bool {
            (0x61...0x7A).contains(byte) || (0x30...0x39).contains(byte) || [UInt8(ascii: "_"), UInt8(ascii: "-"), UInt8(ascii: "*"), UInt8(ascii: "/")].contains(byte)
        }
        let keyValid: Bool
        if let at = key.firstIndex(of: UInt8(ascii: "@")) {
            let tenant = key[..<at], system = key[(at + 1)...]
            keyValid = (1...241).contains(tenant.count) && (1...14).contains(system.count)
                && tenant.allSatisfy(isKeyByte) && (0x61...0x7A).contains(system.first!) && system.allSatisfy(isKeyByte)
        } else {
            keyValid = (1...256).contains(key.count) && (0x61...0x7A).contains(key[0]) && key.allSatisfy(isKeyByte)
        }
        let valueValid = (1...256).contains(value.count) && value.last != UInt8(ascii: " ")
            && value.allSatisfy { (0x20...0x7E).contains($0) && $0 != UInt8(ascii: ",") && $0 != UInt8(ascii: "=") }
        return keyValid && valueValid
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
