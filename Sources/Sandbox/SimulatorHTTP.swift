import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import NIOFoundationCompat

/// Small pieces every simulator uses to read a request and answer in its upstream's shape.
enum SimulatorHTTP {
    static let maxBodyBytes = 256 * 1024

    static func json(_ status: HTTPResponse.Status, _ object: [String: Any]) -> Response {
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data()
        return Response(
            status: status,
            headers: [.contentType: "application/json"],
            body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }

    /// A path parameter, percent-decoded (ids may hold any character).
    static func parameter(_ context: SimulatorContext, _ name: String) -> String {
        let raw = context.parameters.get(name) ?? ""
        return raw.removingPercentEncoding ?? raw
    }

    /// The same JSON written twice need not be the same bytes; compare it canonically.
    static func canonicalJSON(_ object: [String: Any]) -> Data {
        (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data()
    }

    static func header(_ request: Request, _ name: String) -> String? {
        request.headers[HTTPField.Name(name)!]
    }

    static func body(_ request: Request) async -> Data? {
        guard let buffer = try? await request.body.collect(upTo: maxBodyBytes) else { return nil }
        return Data(buffer: buffer)
    }

    /// The body as a JSON object, or nil when it is not one.
    static func jsonObject(_ body: Data?) -> [String: Any]? {
        guard let body else { return nil }
        return (try? JSONSerialization.jsonObject(with: body)) as? [String: Any]
    }

    /// PassKit certificates are DER: an ASN.1 SEQUENCE.
    static func looksLikeDER(_ bytes: Data) -> Bool { bytes.first == 0x30 && bytes.count > 16 }
}
