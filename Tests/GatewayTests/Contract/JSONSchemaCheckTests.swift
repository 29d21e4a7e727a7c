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
        // JSON Schema's `number` takes integers too; `integer` takes no fraction.
        #expect(number.problems(try Self.value("1"), at: "n").isEmpty)
        #expect(try Self.check(["type": "integer"]).problems(try Self.value("1.5"), at: "n") == ["n: must be an integer"])
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
        // A value no form's enum takes is told every form's values, not the closest form's alone
        // (which read as if `slow` were refused too).
        #expect(schema.problems(try Self.value(#"{"mode":"SLOW"}"#), at: "") == ["mode: must be one of reset, slow"])
        #expect(schema.problems(try Self.value(#"{"mode":"fast","delay_ms":1}"#), at: "") == ["mode: must be one of reset, slow"])
    }


    @Test func aKeywordTheCheckerDoesNotKnowFailsCompilation() {
        #expect(throws: JSONSchemaCheck.SchemaError.self) { try Self.check(["type": "string", "if": ["type": "string"]]) }
        #expect(throws: JSONSchemaCheck.SchemaError.self) { try Self.check(["$ref": "#/components/schemas/Nowhere"]) }
        // A type JSON Schema does not have would refuse every value; it is the spec's mistake.
        #expect(throws: JSONSchemaCheck.SchemaError.self) { try Self.check(["type": "int"]) }
        #expect(throws: JSONSchemaCheck.SchemaError.self) { try Self.check(["type": ["string", "text"]]) }
    }

    /// Problems name the value's place from the top (members joined by `.`, items by `[n]`),
    /// "the body" for the whole, and the given root before all of it; the walk that builds these
    /// only on a problem must give the same names at every depth.
    @Test func problemsNameNestedMembersAndItemsFromTheTop() throws {
        let schema = try Self.check([
            "type": "object", "additionalProperties": false,
            "properties": [
                "device": ["type": "object", "required": ["type"], "additionalProperties": false,
                           "properties": ["type": ["type": "string", "enum": ["phone", "watch"]]]],
                "certificates": ["type": "array", "maxItems": 3, "items": ["type": "string", "pattern": "^[A-Z]+$"]],
                "lines": ["type": "array", "items": ["type": "array", "items": ["type": "object", "required": ["n"],
                          "properties": ["n": ["type": ["integer", "null"], "maximum": 9]]]]],
            ],
        ])
        let value = try Self.value(#"""
            {"device":{"type":"tablet","x":1},"certificates":["AB","cd","EF","GH"],"lines":[[{"n":1}],[{"n":10},{},{"n":"1"}]],"extra":true}
            """#)
        #expect(schema.problems(value, at: "") == [
            "certificates: must hold at most 3 items",
            "certificates[1]: must match ^[A-Z]+$",
            "device.type: must be one of phone, watch",
            "device.x: not a field of this request",
            "extra: not a field of this request",
            "lines[1][0].n: must be at most 9",
            "lines[1][1].n: required",
            "lines[1][2].n: must be an integer or a null",
        ])
        #expect(schema.problems(value, at: "request").first == "request.certificates: must hold at most 3 items")
        #expect(schema.problems(.string("x"), at: "") == ["the body: must be an object"])
        #expect(try Self.check(["type": "array", "items": ["type": "string"]]).problems(try Self.value("[1]"), at: "") == ["[0]: must be a string"])
        #expect(schema.problems(try Self.value(#"{"device":{"type":"watch"},"certificates":["AB"],"lines":[[{"n":null}]]}"#), at: "").isEmpty)
    }

    /// The parse keeps every shape as it was sent, and a name given twice resolves to the value
    /// Foundation's decoder gives the generated types (which read the same keyed containers), so
    /// the check and the handler never see two different values for one field.
    @Test func theParseKeepsEveryShapeAndResolvesARepeatedNameAsTheDecoderDoes() throws {
        let value = try Self.value(#"{"s":"a","i":-2,"d":1.5,"t":true,"f":false,"z":null,"a":[1,"b",[],{}],"o":{"p":{"q":[null]}}}"#)
        #expect(value == .object([
            "s": .string("a"), "i": .integer(-2), "d": .number(1.5), "t": .bool(true), "f": .bool(false), "z": .null,
            "a": .array([.integer(1), .string("b"), .array([]), .object([:])]),
            "o": .object(["p": .object(["q": .array([.null])])]),
        ]))
        struct Typed: Decodable { let nonce: String }
        let repeated = Data(#"{"nonce":"first","nonce":"second"}"#.utf8)
        let typed = try JSONDecoder().decode(Typed.self, from: repeated)
        #expect(try JSONDecoder().decode(JSONValue.self, from: repeated) == .object(["nonce": .string(typed.nonce)]))
    }

    @Test func problemsNeverEchoAValue() throws {
        let schema = try Self.check(["type": "string", "pattern": "^[0-9]+$", "maxLength": 4])
        let secret = "4111111111111111"
        #expect(schema.problems(.string(secret), at: "pan").allSatisfy { !$0.contains(secret) })
        #expect(schema.problems(.string("41x1"), at: "pan").allSatisfy { !$0.contains("41x1") })
    }
}
