import ByteText
import Foundation

/// The JSON the Secure Element decrypts, in the field order and escaping a production TSP writes:
/// `{"primaryAccountNumber":...,"name":...,"expiration":"MM\/YY","nonce":<hex>,"nonceSignature":<hex>}`.
public struct PassPlaintext: Sendable, Equatable, Codable {
    public let primaryAccountNumber: String
    public let name: String
    /// MM/YY
    public let expiration: String
    /// PassKit's nonce bytes as lowercase hex (not base64).
    public let nonce: String
    public let nonceSignature: String

    public init(primaryAccountNumber: String, name: String, expiryMonth: Int, expiryYear: Int, nonce: Data, nonceSignature: Data) {
        self.primaryAccountNumber = primaryAccountNumber
        self.name = name
        self.expiration = String(format: "%02d/%02d", expiryMonth, expiryYear % 100)
        self.nonce = nonce.lowercaseHex
        self.nonceSignature = nonceSignature.lowercaseHex
    }

    enum CodingKeys: String, CodingKey {
        case primaryAccountNumber, name, expiration, nonce, nonceSignature
    }

    /// The fields in the TSP's order. JSONEncoder does not promise an order for an object's keys,
    /// so each value is encoded by it (its default escaping writes `/` as `\/`) and the object is
    /// framed here.
    public func encoded() throws -> Data {
        let encoder = JSONEncoder()
        let fields: [(CodingKeys, String)] = [
            (.primaryAccountNumber, primaryAccountNumber), (.name, name), (.expiration, expiration),
            (.nonce, nonce), (.nonceSignature, nonceSignature),
        ]
        var json = Data("{".utf8)
        for (index, (key, value)) in fields.enumerated() {
            if index > 0 { json += Data(",".utf8) }
            json += try encoder.encode(key.stringValue) + Data(":".utf8) + encoder.encode(value)
        }
        return json + Data("}".utf8)
    }
}

/// The plaintext holds the card number, name and nonces: printing it shows none of them.
extension PassPlaintext: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public var description: String { "<redacted>" }
    public var debugDescription: String { "<redacted>" }
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
}
