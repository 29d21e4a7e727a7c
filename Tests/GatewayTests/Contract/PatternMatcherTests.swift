import Foundation
@testable import Gateway
import Testing

/// The byte-level matchers stand in for ICU only where they answer exactly as the regex does
/// (with JSON Schema's `$`): every pattern of the served spec they take is checked against the
/// regex on edge cases and on thousands of random inputs, valid and broken.
@Suite struct PatternMatcherTests {
    /// The `pattern`s of the served OpenAPI document, read from its text.
    static let specPatterns: [String] = {
        let spec = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Sources/ProvisioningAPI/openapi.yaml")
        let text = (try? String(contentsOf: spec, encoding: .utf8)) ?? ""
        let regex = try! NSRegularExpression(pattern: "pattern: '((?:[^']|'')*)'")
        let matches = regex.matches(in: text, range: NSRange(text.startIndex..<text.endIndex, in: text))
        let patterns = matches.compactMap { Range($0.range(at: 1), in: text).map { text[$0].replacingOccurrences(of: "''", with: "'") } }
        return Array(Set(patterns)).sorted()
    }()

    static func pattern(_ source: String) throws -> JSONSchemaCheck.Pattern {
        JSONSchemaCheck.Pattern(source: source, regex: try NSRegularExpression(pattern: source))
    }

    @Test func theSpecsBase64HexAndClassPatternsAreMatchedByteByByte() throws {
        let patterns = Self.specPatterns
        #expect(patterns.count >= 8, "the spec's patterns were not found")
        #expect(patterns.contains(JSONSchemaCheck.FastMatcher.canonicalBase64Source))
        #expect(patterns.contains(JSONSchemaCheck.FastMatcher.hexPairsSource))
        let fast = try patterns.filter { try Self.pattern($0).fast != nil }
        // The certificate, nonce and signature fields' patterns at least, and the id classes.
        #expect(fast.count >= 6, "\(fast)")
    }

    static func randomInputs(count: Int) -> [String] {
        var generator = SystemRandomNumberGenerator()
        let base64Alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=")
        let odd: [Character] = ["\n", "\r", " ", "é", "\u{0}", "\u{7F}", "-", "_", ".", ":", "[", "]", "\\", "^", "%", "~", "!"]
        let printable = (0x20...0x7E).map { Character(Unicode.Scalar($0)!) } + odd
        var inputs: [String] = []
        for index in 0..<count {
            let bytes = (0..<Int.random(in: 0...40, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) }
            var text: String
            switch index % 5 {
            case 0: text = Data(bytes).base64EncodedString()
            case 1: text = bytes.map { String(format: "%02x", $0) }.joined()
            case 2: text = String((0..<Int.random(in: 0...140, using: &generator)).map { _ in printable.randomElement(using: &generator)! })
            case 3: text = String((0..<Int.random(in: 0...12, using: &generator)).map { _ in base64Alphabet.randomElement(using: &generator)! })
            default: text = bytes.map { String(format: "%02X", $0) }.joined()
            }
            // Half of them broken in one place: a character replaced, or a line break appended.
            if Bool.random(using: &generator), !text.isEmpty {
                var characters = Array(text)
                characters[Int.random(in: 0..<characters.count, using: &generator)] = printable.randomElement(using: &generator)!
                text = String(characters)
            } else if Int.random(in: 0..<8, using: &generator) == 0 {
                text += "\n"
            }
            inputs.append(text)
        }
        return inputs
    }

    static let edgeCases = [
        "", "A", "AA", "AAA", "AAAA", "AA==", "AB==", "AQ==", "Ag==", "AAA=", "AAB=", "AAE=", "A===", "=AAA", "A=A=", "AAAA\n", "AAAA====",
        "0", "0F", "0f", "0g", "0F0", "0F\n", "é", "a b", "ab\n", String(repeating: "a", count: 64), String(repeating: "a", count: 65),
        String(repeating: "a", count: 128), String(repeating: "a", count: 129), "a.b:c-d_e", "-", "~", "\u{0}",
    ]

    @Test(arguments: specPatterns)
    func answersAsTheRegexDoes(_ source: String) throws {
        let pattern = try Self.pattern(source)
        guard let fast = pattern.fast else { return }
        for input in Self.edgeCases + Self.randomInputs(count: 3000) {
            #expect(fast.matches(input) == pattern.regexMatches(input), "\(source) on \(input.debugDescription)")
        }
    }

    @Test func patternsOfOtherShapesKeepTheRegex() {
        for source in ["^[a-z]+(?:-[a-z]+)*$", "^[\\x21-\\x7E]{1,4}$", "^[^a]{1,3}$", "[a-z]{1,3}", "^[a-z]{1,3}", "^[a-z]{3,1}$"] {
            #expect(JSONSchemaCheck.FastMatcher(pattern: source) == nil, "\(source)")
        }
    }
}
