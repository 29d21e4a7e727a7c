import Foundation
import ProvisioningCore

/// JSON in and out of upstream wire types, with decoding failures read as protocol errors.
enum WireJSON {
    static func encode<T: Encodable>(_ value: T) -> Data {
        // Wire types are plain strings and nested structs: encoding them cannot fail.
        try! SharedJSON.canonicalEncoder.encode(value)
    }

    static func decode<T: Decodable>(_ type: T.Type, from body: Data, issuer: IssuerID) throws(GatewayError) -> T {
        do {
            return try SharedJSON.decoder.decode(type, from: body)
        } catch {
            throw GatewayError(.upstreamProtocolError, "\(issuer) answered 200 with a body that is not its documented shape", condition: .malformed)
        }
    }

    /// Error bodies are read for their code only; a body that is not the documented shape still
    /// leaves the HTTP status to decide.
    static func decodeError<T: Decodable>(_ type: T.Type, from body: Data) -> T? {
        try? SharedJSON.decoder.decode(type, from: body)
    }
}
