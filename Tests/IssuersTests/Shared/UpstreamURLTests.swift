import Foundation
@testable import Issuers
import Testing

/// `URL.appending(segments:query:)` skips Foundation's percent-encoding for text made only of
/// RFC 3986 unreserved characters. Its output must be exactly Foundation's for every input.
@Suite struct UpstreamURLTests {
    /// Unreserved characters, reserved ones, `%`, space, controls and non-ASCII.
    static let alphabet: [Character] = Array("aZ09-._~") + Array("/?#;:@&=+$,!*'()[]%") + [" ", "\n", "\u{7F}", "é", "€", "👋"]

    @Test(arguments: [("segment", URL.segmentAllowed), ("query value", URL.queryValueAllowed)])
    func encodingIsFoundationsForEveryInput(_ name: String, _ allowed: CharacterSet) {
        var generator = SystemRandomNumberGenerator()
        var inputs = ["", "card_1", "ca-bench.2~x", "cm 1/x", "a/b", "a%2Fb", "..", "100%", "é", "q?x#y", "a;b"]
        for _ in 0..<3000 {
            let length = Int.random(in: 0...12, using: &generator)
            // Mostly unreserved, so both the fast path and the fallback run often.
            inputs.append(String((0..<length).map { _ in
                Bool.random(using: &generator) ? Self.alphabet[Int.random(in: 0..<8, using: &generator)] : Self.alphabet.randomElement(using: &generator)!
            }))
        }
        for input in inputs {
            #expect(URL.encoded(input, allowed: allowed) == (input.addingPercentEncoding(withAllowedCharacters: allowed) ?? input),
                    "\(name) \(input.debugDescription)")
        }
    }

    @Test func segmentsCannotAddPathLevelsOrAQuery() throws {
        let base = try #require(URL(string: "https://issuer.example/v0/"))
        #expect(base.appending(segments: ["customers", "cust_1", "cards"]).absoluteString == "https://issuer.example/v0/customers/cust_1/cards")
        #expect(base.appending(segments: ["a/b", "c?d#e", "f;g"]).absoluteString == "https://issuer.example/v0/a%2Fb/c%3Fd%23e/f%3Bg")
        #expect(base.appending(segments: ["x"], query: [("nonce", "a+b=c&d"), ("id", "q_1")]).absoluteString
                == "https://issuer.example/v0/x?nonce=a%2Bb%3Dc%26d&id=q_1")
    }

    /// Where a URL sends a request and the Host header it names: the port only when it is not
    /// the scheme's own, an IPv6 address in brackets.
    @Test(arguments: [
        ("http://127.0.0.1:8080/v0/x?a=b", "127.0.0.1:8080", "/v0/x?a=b"),
        ("https://issuer.example/v0/", "issuer.example", "/v0/"),
        ("https://issuer.example:443", "issuer.example", "/"),
        ("http://issuer.example:443/x", "issuer.example:443", "/x"),
        ("http://[::1]:9000/a%2Fb", "[::1]:9000", "/a%2Fb"),
        ("https://[2001:db8::1]/v1", "[2001:db8::1]", "/v1"),
    ])
    func theTargetAndHostHeaderOfAURL(_ url: String, _ host: String, _ path: String) throws {
        let parsed = try #require(URL(string: url))
        let (target, requestPath) = try #require(UpstreamHTTP.target(parsed))
        #expect(UpstreamHTTP.hostHeader(target) == host)
        #expect(requestPath == path)
    }

    @Test(arguments: ["ftp://issuer.example/x", "file:///etc/passwd", "https:///nohost"])
    func aURLThatIsNotHTTPWithAHostHasNoTarget(_ url: String) throws {
        let parsed = try #require(URL(string: url))
        #expect(UpstreamHTTP.target(parsed) == nil)
    }
}
