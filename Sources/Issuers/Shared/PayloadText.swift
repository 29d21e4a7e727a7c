import ByteText
import Foundation
import ProvisioningCore

/// Reading the payload fields upstreams send back, which do not all follow their own docs.
enum PayloadText {
    /// Base64 as upstreams actually write it (either alphabet, any padding): `Data(lenientBase64:)`.
    static func lenientBase64(_ text: String) -> Data? { Data(lenientBase64: text) }

    /// The ephemeral key as hex (130 characters) or base64; both appear in Bridge's documents.
    static func ephemeralPublicKey(_ text: String) -> Data? {
        if text.count == ApplePayPayload.uncompressedP256KeyLength * 2, let bytes = Data(hex: text) {
            return bytes
        }
        return lenientBase64(text)
    }

    static func require(_ value: Data?, field: String, issuer: IssuerID) throws(GatewayError) -> Data {
        guard let value else {
            throw GatewayError(.upstreamProtocolError, "\(issuer) sent \(field) in an encoding the gateway does not read", condition: .malformed)
        }
        return value
    }
}
