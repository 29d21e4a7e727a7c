@testable import GatewayServer
import Testing

/// Which bodies the request contract reads: JSON by media type (RFC 8259's `application/json` and
/// RFC 6839's `+json` suffix), whatever the case, parameters and surrounding spaces.
@Suite struct JSONContentTypeTests {
    @Test(arguments: [
        ("application/json", true), ("Application/JSON; charset=utf-8", true), ("  application/json  ;charset=utf-8", true),
        ("application/merge-patch+json", true), ("application/problem+JSON", true),
        ("text/plain", false), ("application/jsonx", false), ("application/json-seq", false), ("application/x-json", false),
        ("", false), ("; application/json", false), ("application/xml", false),
    ])
    func isReadAsJSON(_ contentType: String, _ expected: Bool) {
        #expect(RequestContractMiddleware.isJSON(contentType) == expected, "\(contentType)")
    }

    /// The query the contract checks is the one the generated code hands the handler: `+` is a
    /// space, `%2B` a plus, escapes decoded even beside a character URLComponents would re-encode.
    @Test(arguments: [
        ("/v1/cards?limit=+1", [("limit", " 1")]),
        ("/v1/cards?limit=%2B1", [("limit", "+1")]),
        ("/v1/cards?limit=%31%30&x=|", [("limit", "10"), ("x", "|")]),
        ("/v1/admin/audit?actor=a+b&after=5#frag", [("actor", "a b"), ("after", "5")]),
        ("/v1/cards?flag&=v&bad=%ZZ", [("flag", ""), ("", "v"), ("bad", "")]),
        ("/v1/cards", []),
    ])
    func aQueryIsReadAsTheGeneratedCodeReadsIt(target: String, items: [(String, String)]) {
        let read = RequestContractMiddleware.queryItems(target)
        #expect(read.map(\.name) == items.map(\.0) && read.map(\.value) == items.map(\.1), "\(read)")
    }
}
