import Gateway
import Testing

/// A caller's trace headers are read before it is authenticated and passed on to every upstream:
/// only W3C-shaped, bounded values are kept.
struct TraceHeadersTests {
    static let traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

    func kept(_ headers: [(String, String)]) -> [String: String] {
        let parsed = TraceHeaders(from: headers.map { (name: $0.0, value: $0.1) })
        return Dictionary(uniqueKeysWithValues: TraceHeaders.names.compactMap { name in parsed[name].map { (name, $0) } })
    }

    @Test func aW3CTraceparentAndABoundedTracestateAreKept() {
        let state = (1...TraceHeaders.maxTraceStateMembers).map { "v\($0)=x" }.joined(separator: ",")
        #expect(kept([("TraceParent", Self.traceparent), ("tracestate", state)]) == ["traceparent": Self.traceparent, "tracestate": state])
    }

    @Test(arguments: [
        String(repeating: "a", count: 4_000),
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0\u{1}",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-fff",
        "0-4bf92f3577b34da6a3ce929d0e0e47366-00f067aa0ba902b7-01",
    ])
    func anythingElseAsTraceparentIsDroppedWithItsTracestate(traceparent: String) {
        #expect(kept([("traceparent", traceparent), ("tracestate", "vendor=opaque")]).isEmpty)
    }

    /// Blanks around members and empty members are W3C's and dropped; the rest is kept as sent.
    @Test func aTracestateIsPassedOnWithoutItsEmptyMembers() {
        let state = " congo=t61rcWkgMzE , ,rojo=00f067aa0ba902b7,\tacme@sys=a b"
        #expect(kept([("traceparent", Self.traceparent), ("tracestate", state)])["tracestate"] == "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7,acme@sys=a b")
    }

    /// One malformed member drops the `tracestate`, never the `traceparent` with it.
    @Test(arguments: ["Upper=1", "k", "=v", "k=", "k=a,b=", "k=v=w", "1k=v", "k=\u{7F}", "@sys=v", "t@Sys=v", ",", "k=é"])
    func aMalformedTracestateIsDroppedAlone(state: String) {
        #expect(kept([("traceparent", Self.traceparent), ("tracestate", state)]) == ["traceparent": Self.traceparent], "\(state.debugDescription)")
    }

    /// A tracestate holding what reads as a card number is neither exported nor sent on.
    @Test(arguments: ["pan=4111111111111111", "a=1,pan=5555-5555-5555-4444"])
    func aTracestateWithACardNumberIsDroppedAlone(state: String) {
        #expect(kept([("traceparent", Self.traceparent), ("tracestate", state)]) == ["traceparent": Self.traceparent])
    }

    @Test func anOversizedTracestateIsDroppedAlone() {
        let tooMany = (1...TraceHeaders.maxTraceStateMembers + 1).map { "v\($0)=x" }.joined(separator: ",")
        let tooLong = "v=" + String(repeating: "x", count: TraceHeaders.maxTraceStateBytes)
        for state in [tooMany, tooLong] {
            #expect(kept([("traceparent", Self.traceparent), ("tracestate", state)]) == ["traceparent": Self.traceparent])
        }
    }
}
