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
            return data.base64EncodedString()
                .replacingOccurrences(of: "+", with: "-")
                .replacingOccurrences(of: "/", with: "_")
                .replacingOccurrences(of: "=", with: "")
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
            guard !text.contains("+"), !text.contains("/"), !text.contains("=") else { return nil }
            var standard = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
            standard += String(repeating: "=", count: (4 - standard.count % 4) % 4)
            return Data(base64Encoded: standard)
        }
    }
}

extension Data {
    /// Parses hex text, either case; nil on an odd length or a non-hex character.
    public init?(hex: String) {
        let utf8 = Array(hex.utf8)
        guard utf8.count % 2 == 0 else { return nil }
        var bytes = [UInt8]()
        bytes.reserveCapacity(utf8.count / 2)
        var index = 0
        while index < utf8.count {
            guard let high = Self.nibble(utf8[index]), let low = Self.nibble(utf8[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
            index += 2
        }
        self.init(bytes)
    }

    public var lowercaseHex: String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(count * 2)
        for byte in self {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    private static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
