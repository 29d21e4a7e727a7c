import Foundation
import ProvisioningCore

/// JSON in and out of upstream wire types, with decoding failures read as protocol errors.
enum WireJSON {
    static func encode<T: Encodable>(_ value: T) -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Wire types are plain strings and nested structs: encoding them cannot fail.
        return try! encoder.encode(value)
    }

    static func decode<T: Decodable>(_ type: T.Type, from body: Data, issuer: IssuerID) throws(GatewayError) -> T {
        do {
            return try JSONDecoder().decode(type, from: body)
        } catch {
            throw GatewayError(.upstreamProtocolError, "\(issuer) answered 200 with a body that is not its documented shape", condition: .malformed)
        }
    }

    /// Error bodies are read for their code only; a body that is not the documented shape still
    /// leaves the HTTP status to decide.
    static func decodeError<T: Decodable>(_ type: T.Type, from body: Data) -> T? {
        try? JSONDecoder().decode(type, from: body)
    }
}
