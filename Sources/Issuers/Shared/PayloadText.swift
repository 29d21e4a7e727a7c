import Foundation
import ProvisioningCore

/// Reading the payload fields upstreams send back, which do not all follow their own docs.
enum PayloadText {
    /// Base64 as upstreams actually write it: standard or URL alphabet, padding present, missing or
    /// surplus (Bridge's own example `...F127==` has two characters of padding too many).
    static func lenientBase64(_ text: String) -> Data? {
        var body = Substring(text)
        while body.last == "=" { body = body.dropLast() }
        guard !body.isEmpty else { return nil }
        var standard = body.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        guard standard.count % 4 != 1 else { return nil }
        standard += String(repeating: "=", count: (4 - standard.count % 4) % 4)
        return Data(base64Encoded: standard)
    }

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
