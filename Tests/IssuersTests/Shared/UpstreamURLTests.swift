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
}
