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
}
