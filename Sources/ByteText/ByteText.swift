import Foundation

/// Bytes as text: the one hex, base64url and lenient base64 implementation every module uses.
/// Standard base64 is Foundation's own (`Data(base64Encoded:)`, `base64EncodedString()`).
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
        withUnsafeBytes { Self.lowercaseHex($0) }
    }

    /// Two lowercase hex digits per byte, written straight into the string's storage (no
    /// per-byte `Data` iteration, no intermediate array).
    public static func lowercaseHex(_ bytes: UnsafeRawBufferPointer) -> String {
        String(unsafeUninitializedCapacity: bytes.count * 2) { out in
            for (index, byte) in bytes.enumerated() {
                out[2 * index] = hexDigit(byte >> 4)
                out[2 * index + 1] = hexDigit(byte & 0x0F)
            }
            return bytes.count * 2
        }
    }

    @inline(__always)
    private static func hexDigit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? 0x30 + nibble : 0x61 - 10 + nibble
    }

    /// RFC 4648 section 5 without padding (safe in a URL query); nil for anything else, including
    /// the standard alphabet or padding.
    public init?(base64URLEncoded text: String) {
        guard !text.utf8.contains(where: { $0 == UInt8(ascii: "+") || $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "=") }) else { return nil }
        self.init(base64Encoded: Self.standardBase64(text.utf8[...]))
    }

    /// RFC 4648 section 5, without padding.
    public func base64URLEncodedString() -> String {
        var bytes = base64EncodedData()
        while bytes.last == UInt8(ascii: "=") { bytes.removeLast() }
        for index in bytes.indices {
            switch bytes[index] {
            case UInt8(ascii: "+"): bytes[index] = UInt8(ascii: "-")
            case UInt8(ascii: "/"): bytes[index] = UInt8(ascii: "_")
            default: break
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Base64 as upstreams actually write it: standard or URL alphabet, padding present, missing or
    /// surplus (Bridge's own example `...F127==` has two characters of padding too many).
    public init?(lenientBase64 text: String) {
        var body = text.utf8[...]
        while body.last == UInt8(ascii: "=") { body = body.dropLast() }
        guard !body.isEmpty, body.count % 4 != 1 else { return nil }
        self.init(base64Encoded: Self.standardBase64(body))
    }

    /// The URL alphabet mapped to the standard one, padded to a multiple of four, as bytes (no
    /// String round trip: this runs on every upstream answer), written into a buffer of the final
    /// size (`Data.append` one byte at a time cost more than the decoding).
    private static func standardBase64(_ text: Substring.UTF8View) -> Data {
        let count = text.count
        var standard = Data(count: (count + 3) / 4 * 4)
        standard.withUnsafeMutableBytes { buffer in
            var index = 0
            for byte in text {
                switch byte {
                case UInt8(ascii: "-"): buffer[index] = UInt8(ascii: "+")
                case UInt8(ascii: "_"): buffer[index] = UInt8(ascii: "/")
                default: buffer[index] = byte
                }
                index += 1
            }
            while index < buffer.count {
                buffer[index] = UInt8(ascii: "=")
                index += 1
            }
        }
        return standard
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
