import Foundation
@testable import Issuers
import Testing

/// `UpstreamBase` joins a request's path as text. Its encoding skips Foundation's percent-encoding
/// for text made only of RFC 3986 unreserved characters, and must be exactly Foundation's for
/// every input; a parser must read back exactly the segments given.
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
        let base = UpstreamBase(try #require(URL(string: "https://issuer.example/v0/")))
        #expect(base.requestTarget(["customers", "cust_1", "cards"]) == "/v0/customers/cust_1/cards")
        #expect(base.requestTarget(["a/b", "c?d#e", "f;g"]) == "/v0/a%2Fb/c%3Fd%23e/f%3Bg")
        #expect(base.requestTarget(["x"], query: [("nonce", "a+b=c&d"), ("id", "q_1")]) == "/v0/x?nonce=a%2Bb%3Dc%26d&id=q_1")
    }

    /// Whatever a segment holds, a URL parser reads back exactly the segments given, below the
    /// base's own path: the target is built as text, and Foundation's parser is the judge.
    @Test func aParserReadsBackEverySegmentAsGiven() throws {
        var generator = SystemRandomNumberGenerator()
        let base = UpstreamBase(try #require(URL(string: "https://issuer.example/v0/api")))
        for _ in 0..<2000 {
            let segments = (0..<Int.random(in: 1...4, using: &generator)).map { _ in
                String((0..<Int.random(in: 1...10, using: &generator)).map { _ in Self.alphabet.randomElement(using: &generator)! })
            }.filter { $0 != "." && $0 != ".." }
            let target = base.requestTarget(segments)
            let parsed = try #require(URL(string: "https://issuer.example" + target), "\(segments)")
            #expect(parsed.query(percentEncoded: true) == nil, "\(segments)")
            let levels = parsed.path(percentEncoded: true).split(separator: "/", omittingEmptySubsequences: false).map(String.init)
            #expect(Array(levels.dropFirst(3)).map { $0.removingPercentEncoding } == segments, "\(segments) -> \(target)")
        }
    }

    /// The base's path with or without its last "/", the root, and a base's own query (kept
    /// unless the request adds one); the Host header names a port only when it is not the scheme's.
    @Test(arguments: [
        ("https://issuer.example/v0/", ["x"], [(String, String)](), "/v0/x", "issuer.example"),
        ("https://issuer.example/v0", ["x", "y"], [], "/v0/x/y", "issuer.example"),
        ("https://issuer.example", ["x"], [], "/x", "issuer.example"),
        ("https://issuer.example/", [], [], "/", "issuer.example"),
        ("http://127.0.0.1:8080/v0?tenant=a", ["x"], [], "/v0/x?tenant=a", "127.0.0.1:8080"),
        ("http://127.0.0.1:8080/v0?tenant=a", ["x"], [("count", "5")], "/v0/x?count=5", "127.0.0.1:8080"),
        // A value cannot add a parameter, whichever separator the server splits on.
        ("https://issuer.example/v1", ["cards"], [("card_token", "x;card_token=y&z=1")], "/v1/cards?card_token=x%3Bcard_token%3Dy%26z%3D1",
         "issuer.example"),
        ("http://[::1]:9000/a%2Fb", ["c"], [], "/a%2Fb/c", "[::1]:9000"),
        ("https://[2001:db8::1]:443/v1", ["c"], [], "/v1/c", "[2001:db8::1]"),
    ])
    func theRequestTargetBelowABase(_ url: String, _ segments: [String], _ query: [(String, String)], _ target: String, _ host: String) throws {
        let base = UpstreamBase(try #require(URL(string: url)))
        #expect(base.requestTarget(segments, query: query) == target)
        #expect(base.hostHeader == host)
        #expect(base.target != nil)
    }

    @Test(arguments: ["ftp://issuer.example/x", "file:///etc/passwd", "https:///nohost"])
    func aBaseThatIsNotHTTPWithAHostHasNoTarget(_ url: String) throws {
        #expect(UpstreamBase(try #require(URL(string: url))).target == nil)
    }
}
