import ByteText
import Foundation

/// How bytes travel as text. Each upstream picks one; the unified API accepts base64 or hex.
public enum BinaryEncoding: String, Sendable, Codable, CaseIterable {
    case base64
    case hex
    /// RFC 4648 section 5, without padding (safe in a URL query).
    case base64URL = "base64url"

    public func encode(_ data: Data) -> String {
        switch self {
        case .base64:
            return data.base64EncodedString()
        case .hex:
            return data.lowercaseHex
        case .base64URL:
            return data.base64URLEncodedString()
        }
    }

    /// Strict decoding: nil for anything that is not exactly this encoding.
    public func decode(_ text: String) -> Data? {
        switch self {
        case .base64:
            return Data(base64Encoded: text)
        case .hex:
            return Data(hex: text)
        case .base64URL:
            return Data(base64URLEncoded: text)
        }
    }
}
