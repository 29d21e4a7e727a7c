import Foundation
@testable import Gateway
import Testing

/// A member name given twice can mean one request to a reader that keeps the first and another to
/// one that keeps the last: the contract refuses it, and names where when the copies differ.
@Suite struct DuplicateMembersTests {
    static func difference(_ json: String) throws -> String? {
        let body = Data(json.utf8)
        return DuplicateMembers.duplicate(in: body, parsed: try JSONDecoder().decode(JSONValue.self, from: body))
    }

    @Test(arguments: [
        (#"{"nonce":"a","nonce":"b"}"#, "nonce"),
        (#"{"device":{"type":"phone","type":"watch"}}"#, "device.type"),
        (#"{"certificates":["x",{"k":1,"k":2}]}"#, "certificates[1].k"),
        (#"{"n":1,"n":2}"#, "n"),
        (#"{"n":1,"n":"1"}"#, "n"),
        (#"{"b":true,"b":false}"#, "b"),
        (#"{"z":null,"z":"x"}"#, "z"),
        (#"{"a":[1],"a":[1,2]}"#, "a"),
        (#"{"o":{"x":"1"},"o":{"y":"1"}}"#, "o"),
        // Copies that say the same thing are refused too, without a place.
        (#"{"nonce":"a","nonce":"a"}"#, "the body"),
        (#"{"d":{"t":"x","t":"x"}}"#, "the body"),
        // The same name spelt with an escape is the same name.
        (#"{"nonce":"a","non\u0063e":"b"}"#, "nonce"),
    ])
    func aNameGivenAgainWithAnotherValueIsFound(json: String, path: String) throws {
        #expect(try Self.difference(json) == path)
    }

    /// Never a body that names each member once, whatever its values and its strings hold.
    @Test(arguments: [
        #"{"nonce":"a","device":{"type":"phone"},"certificates":["x","y"],"n":12,"f":1.5,"big":123456789012345678901234567890,"t":true,"z":null}"#,
        #"{"f":0.1,"g":1e-7,"h":-0.0,"i":9223372036854775807,"j":-9223372036854775808,"k":18446744073709551615}"#,
        #"{"s":"é\u00e9\ud83d\udcb3","e":"","a":[],"o":{}}"#,
        #"{"colons":"a:b:c","quote":"x\":y","slash":"\\","k\":ey":":"}"#,
        #"[1,"two",{"three":3}]"#,
        #""just a string""#,
    ])
    func aBodyWithoutConflictingNamesPasses(json: String) throws {
        #expect(try Self.difference(json) == nil)
    }

    /// A name made up to carry a card number, control characters or a page of text is not repeated
    /// in the problem, which the caller and the logs read.
    @Test(arguments: [
        #"{"4111111111111111":1,"4111111111111111":2}"#,
        #"{"pan 4111-1111-1111-1111":1,"pan 4111-1111-1111-1111":2}"#,
        #"{"4111-1111-1111-1111":1,"4111-1111-1111-1111":2}"#,
        #"{"4111.1111.1111.1111":1,"4111.1111.1111.1111":2}"#,
        #"{"a\u001b[31m":1,"a\u001b[31m":2}"#,
        "{\"\(String(repeating: "x", count: 101))\":1,\"\(String(repeating: "x", count: 101))\":2}",
    ])
    func aMadeUpNameIsNotRepeated(json: String) throws {
        #expect(try Self.difference(json) == "the body")
    }

    static func contract() throws -> RequestContract {
        try RequestContract(spec: Data(contentsOf: URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Sources/ProvisioningAPI/openapi.yaml")))
    }

    /// Through the contract: the problem names the member, beside any other.
    @Test func theContractRefusesItNamingTheMember() throws {
        let body = #"{"wallet_account_id":"WLT-1","device_id":"dev-1","wallet_account_id":"WLT-2"}"#
        let problems = try Self.contract().problems(operationID: "provisionGooglePay", pathParameters: ["card_id": "c1"], query: [],
                                                    header: { _ in [] }, body: Data(body.utf8))
        #expect(problems == ["wallet_account_id: a member name is given more than once"])
    }

    /// One pass over the bytes tells how deep a body nests, strings set aside.
    @Test(arguments: [
        (#""text""#, 0), (#"{}"#, 1), (#"[[],[[]]]"#, 3), (#"{"a":{"b":[1,{"c":"]]]]"}]}}"#, 4), (#"{"a":"[[[[\"[[["}"#, 1),
        // An escaped backslash ends just before the closing quote; the bracket after it counts.
        (#"{"a":"x\\","b":[[1]]}"#, 3), (#"["\\\"[",[]]"#, 2),
    ])
    func theShapeCountsNestingOutsideStrings(json: String, deepest: Int) {
        #expect(DuplicateMembers.shape(of: Data(json.utf8)).deepest == deepest)
    }

    /// A body nested past `maxBodyDepth` is refused before any parser reads it: a parser's work on
    /// a deep text grows faster than its size (60 KB of 500-deep arrays once held a core for
    /// half a minute). At the limit, the body is parsed and checked as any other.
    @Test func aBodyNestedPastTheLimitIsRefusedUnparsed() throws {
        let contract = try Self.contract()
        /// A body whose deepest nesting is `depth` (the object, its `x` array, and `depth - 2` more arrays).
        func problems(depth: Int, copies: Int = 1) -> [String] {
            let one = String(repeating: "[", count: depth - 2) + String(repeating: "]", count: depth - 2)
            let body = #"{"token_unique_reference":"DNITHE1","x":["# + Array(repeating: one, count: copies).joined(separator: ",") + "]}"
            return contract.problems(operationID: "activateToken", pathParameters: [:], query: [], header: { _ in [] }, body: Data(body.utf8))
        }
        let limit = RequestContract.maxBodyDepth
        #expect(problems(depth: limit + 1) == ["the body nests arrays and objects more than \(limit) levels deep"])
        #expect(problems(depth: 500, copies: 60) == ["the body nests arrays and objects more than \(limit) levels deep"])
        // At the limit exactly: parsed, and refused only for what it holds (an unknown field).
        #expect(!problems(depth: limit).contains { $0.contains("levels deep") } && !problems(depth: limit).isEmpty)
    }
}

/// JSON between systems is UTF-8 (RFC 8259): UTF-16 and UTF-32 bodies, and byte order marks, are
/// refused before they are parsed, since not every reader on the way reads them alike.
@Suite struct BodyEncodingTests {
    static let contract = Result { try RequestContract(spec: Data(contentsOf: URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Sources/ProvisioningAPI/openapi.yaml"))) }

    static func problems(_ body: Data) throws -> [String] {
        try contract.get().problems(operationID: "provisionGooglePay", pathParameters: ["card_id": "c1"], query: [], header: { _ in [] },
                                    body: body)
    }

    static let json = #"{"wallet_account_id":"WLT-1","device_id":"dev-1"}"#

    static let marked = "the body must be UTF-8 JSON: it starts with a byte order mark"
    static let nul = "the body must be UTF-8 JSON: it has a NUL byte in its first four (UTF-16 or UTF-32 text has)"

    /// Each is refused, and named for what it starts with: a mark (Foundation's `.utf16` writes
    /// one), or the NULs beside an ASCII character.
    @Test(arguments: [(String.Encoding.utf16BigEndian, nul), (.utf16LittleEndian, nul), (.utf32BigEndian, nul), (.utf32LittleEndian, nul),
                      (.utf16, marked)])
    func otherEncodingsAreRefused(encoding: String.Encoding, problem: String) throws {
        let body = try #require(Self.json.data(using: encoding))
        #expect(try Self.problems(body) == [problem])
    }

    /// A NUL near the start of an otherwise UTF-8 body is not called a byte order mark.
    @Test func aNULAtTheStartIsNamedAsSuch() throws {
        #expect(try Self.problems(Data([0x7B, 0x00]) + Data(Self.json.utf8.dropFirst())) == [Self.nul])
    }

    @Test func aByteOrderMarkIsRefusedAndPlainUTF8Passes() throws {
        #expect(try Self.problems(Data([0xEF, 0xBB, 0xBF]) + Data(Self.json.utf8)) == [Self.marked])
        #expect(try Self.problems(Data(Self.json.utf8)).isEmpty)
        #expect(try Self.problems(Data(#"{"wallet_account_id":"WLT-é","device_id":"dev-1"}"#.utf8)).allSatisfy { !$0.contains("UTF-8") })
    }
}
