@testable import GatewayServer
import Testing

/// Which bodies the gateway reads: `application/json` (the one media type the document gives a
/// body; the generated code takes no `+json` type), whatever the case, parameters and surrounding
/// spaces, in UTF-8.
@Suite struct JSONContentTypeTests {
    @Test(arguments: [
        ("application/json", true), ("Application/JSON; charset=utf-8", true), ("  application/json  ;charset=utf-8", true),
        ("application/merge-patch+json", false), ("application/problem+JSON", false),
        ("text/plain", false), ("application/jsonx", false), ("application/json-seq", false), ("application/x-json", false),
        ("", false), ("; application/json", false), ("application/xml", false),
    ])
    func isReadAsJSON(_ contentType: String, _ expected: Bool) {
        #expect(RequestContractMiddleware.isJSON(contentType) == expected, "\(contentType)")
    }

    @Test(arguments: [
        ("application/json", true), ("application/json; charset=utf-8", true), ("application/json;CHARSET=UTF8", true),
        (#"application/json; charset="utf-8""#, true), ("application/json; x=1; charset=utf-8", true),
        ("application/json; charset=utf-16", false), (#"application/json; charset="utf-16le""#, false),
        ("application/json; charset=iso-8859-1", false), ("application/json; charset", false), ("application/json; charset=", false),
        ("application/json; charset=utf-8; charset=utf-16", false),
    ])
    func onlyUTF8IsTaken(_ contentType: String, _ expected: Bool) {
        #expect(RequestContractMiddleware.charsetIsUTF8(contentType) == expected, "\(contentType)")
        #expect((RequestContractMiddleware.mediaTypeRefusal(contentType) == nil) == expected, "\(contentType)")
    }

    /// The query the contract checks is the one the generated code hands the handler: `+` is a
    /// space, `%2B` a plus, escapes decoded even beside a character URLComponents would re-encode.
    @Test(arguments: [
        ("/v1/cards?limit=+1", [("limit", " 1")]),
        ("/v1/cards?limit=%2B1", [("limit", "+1")]),
        ("/v1/cards?limit=%31%30&x=|", [("limit", "10"), ("x", "|")]),
        ("/v1/admin/audit?actor=a+b&after=5#frag", [("actor", "a b"), ("after", "5")]),
        ("/v1/cards?flag&=v&bad=%ZZ", [("flag", ""), ("", "v"), ("bad", "")]),
        ("/v1/cards?limit=1&", [("limit", "1")]),
        ("/v1/cards", []),
    ])
    func aQueryIsReadAsTheGeneratedCodeReadsIt(target: String, items: [(String, String)]) {
        let read = RequestContractMiddleware.queryItems(target)
        #expect(read.map(\.name) == items.map(\.0) && read.map(\.value) == items.map(\.1), "\(read)")
    }

    /// What the generated code's parser throws on (a part without `=` before the parameter it
    /// looks for) and escapes that decode to nothing are named; a trailing `&` and an empty name
    /// are not the query's fault.
    @Test(arguments: [
        ("/v1/cards?pretty", "every part must be name=value"),
        ("/v1/cards?&", "every part must be name=value"),
        ("/v1/cards?limit=1&&program=demo", "every part must be name=value"),
        ("/v1/cards?a;b", "every part must be name=value"),
        ("/v1/cards?limit%3D1", "every part must be name=value"),
        ("/v1/cards?program=%ZZ", "not percent-encoded UTF-8"),
        ("/v1/cards?actor=%FF", "not percent-encoded UTF-8"),
        ("/v1/cards?limit=1&", nil),
        ("/v1/cards?=v&limit=1", nil),
        ("/v1/cards?", nil),
    ])
    func aQueryThatIsNoFormQueryIsNamed(target: String, problem: String?) {
        let read = RequestContractMiddleware.query(target)
        if let problem {
            #expect(read.problem?.contains(problem) == true, "\(read)")
        } else {
            #expect(read.problem == nil, "\(read)")
        }
    }
}
