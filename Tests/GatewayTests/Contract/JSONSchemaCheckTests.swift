import Foundation
@testable import Gateway
import Testing

/// The schema checker the server runs every request through: the edge cases where JSON Schema
/// and Foundation's defaults differ.
@Suite struct JSONSchemaCheckTests {
    static func check(_ schema: [String: Any], components: [String: Any] = [:]) throws -> JSONSchemaCheck {
        try JSONSchemaCheck(schema, components: components)
    }

    static func value(_ json: String) throws -> JSONValue {
        try JSONDecoder().decode(JSONValue.self, from: Data(json.utf8))
    }

    @Test func aPatternAnchoredAtTheEndRefusesATrailingLineBreak() throws {
        // ICU's `$` also matches before a final line break; JSON Schema's does not.
        let schema = try Self.check(["type": "string", "pattern": "^[a-z]+$"])
        #expect(schema.problems(.string("abc"), at: "id").isEmpty)
        #expect(schema.problems(.string("abc\n"), at: "id") == ["id: must match ^[a-z]+$"])
    }

    @Test func lengthsCountCodePointsAsJSONSchemaDoes() throws {
        let schema = try Self.check(["type": "string", "maxLength": 2])
        // One grapheme, two code points: JSON Schema counts two.
        #expect(schema.problems(.string("e\u{301}"), at: "x").isEmpty)
        #expect(schema.problems(.string("e\u{301}e"), at: "x") == ["x: must be at most 2 characters"])
    }

    @Test(arguments: ["", "abc", "e\u{301}", "\u{E9}t\u{E9}", "\u{20AC}100", "\u{1F4B3}\u{1F4B3}", "a\u{0}b", "\u{10FFFF}\u{7F}\u{80}\u{7FF}\u{800}\u{FFFF}\u{10000}"])
    func codePointsAreCountedFromUTF8AsUnicodeScalars(text: String) {
        // One, two, three and four UTF-8 bytes per code point, at the edges of each length.
        #expect(JSONSchemaCheck.codePoints(text) == text.unicodeScalars.count)
    }

    @Test func aFourByteCodePointCountsOnceAgainstMaxLength() throws {
        let schema = try Self.check(["type": "string", "maxLength": 2])
        #expect(schema.problems(.string("\u{1F4B3}\u{1F4B3}"), at: "x").isEmpty)
        #expect(schema.problems(.string("\u{1F4B3}\u{1F4B3}a"), at: "x") == ["x: must be at most 2 characters"])
    }

    @Test func trueIsNotOneAndOneIsOnePointZero() throws {
        let integer = try Self.check(["type": "integer", "enum": [1]])
        #expect(integer.problems(try Self.value("true"), at: "n") == ["n: must be an integer"])
        #expect(integer.problems(try Self.value("1"), at: "n").isEmpty)
        let number = try Self.check(["type": "number", "enum": [1]])
        #expect(number.problems(try Self.value("1.0"), at: "n").isEmpty)
        #expect(!number.problems(try Self.value("1.5"), at: "n").isEmpty)
    }

    @Test func unknownFieldsAreNamedAndRequiredOnesListed() throws {
        let schema = try Self.check([
            "type": "object", "required": ["a"], "additionalProperties": false, "properties": ["a": ["type": "string"]],
        ])
        #expect(schema.problems(try Self.value(#"{"b":1}"#), at: "") == ["a: required", "b: not a field of this request"])
    }

    @Test func oneOfReportsTheFormTheValueMeant() throws {
        let components: [String: Any] = ["schemas": [
            "Plain": ["type": "object", "required": ["mode"], "additionalProperties": false,
                      "properties": ["mode": ["type": "string", "enum": ["reset"]]]],
            "Slow": ["type": "object", "required": ["mode", "delay_ms"], "additionalProperties": false,
                     "properties": ["mode": ["type": "string", "enum": ["slow"]], "delay_ms": ["type": "integer"]]],
        ]]
        let schema = try Self.check(["oneOf": [["$ref": "#/components/schemas/Plain"], ["$ref": "#/components/schemas/Slow"]]],
                                    components: components)
        #expect(schema.problems(try Self.value(#"{"mode":"slow"}"#), at: "") == ["delay_ms: required"])
        #expect(schema.problems(try Self.value(#"{"mode":"reset","delay_ms":1}"#), at: "") == ["delay_ms: not a field of this request"])
        #expect(schema.problems(try Self.value(#"{"mode":"slow","delay_ms":1}"#), at: "").isEmpty)
    }

    @Test func aKeywordTheCheckerDoesNotKnowFailsCompilation() {
        #expect(throws: JSONSchemaCheck.SchemaError.self) { try Self.check(["type": "string", "if": ["type": "string"]]) }
        #expect(throws: JSONSchemaCheck.SchemaError.self) { try Self.check(["$ref": "#/components/schemas/Nowhere"]) }
    }

    @Test func problemsNeverEchoAValue() throws {
        let schema = try Self.check(["type": "string", "pattern": "^[0-9]+$", "maxLength": 4])
        let secret = "4111111111111111"
        #expect(schema.problems(.string(secret), at: "pan").allSatisfy { !$0.contains(secret) })
        #expect(schema.problems(.string("41x1"), at: "pan").allSatisfy { !$0.contains("41x1") })
    }
}
