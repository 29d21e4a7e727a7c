import ByteText
import Foundation
import Synchronization

/// A small identifier type over a string, so a card id can never be passed where an issuer id is
/// expected. Conformers only store `rawValue`; coding and printing come from here.
public protocol StringIdentifier: Hashable, Sendable, Codable, CustomStringConvertible, ExpressibleByStringLiteral {
    var rawValue: String { get }
    init(_ rawValue: String)
}

extension StringIdentifier {
    public init(stringLiteral value: String) { self.init(value) }
    public init(from decoder: any Decoder) throws { self.init(try decoder.singleValueContainer().decode(String.self)) }
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
    public var description: String { rawValue }
}

public struct CardID: StringIdentifier {
    public let rawValue: String
    public init(_ rawValue: String) { self.rawValue = rawValue }
}

public struct IssuerID: StringIdentifier {
    public let rawValue: String
    public init(_ rawValue: String) { self.rawValue = rawValue }
}

public struct ProgramID: StringIdentifier {
    public let rawValue: String
    public init(_ rawValue: String) { self.rawValue = rawValue }
}

public struct ClientID: StringIdentifier {
    public let rawValue: String
    public init(_ rawValue: String) { self.rawValue = rawValue }
}

/// The gateway's id for one provisioning; also the idempotency key sent to upstreams that honour
/// one, so it stays the same across every attempt of that provisioning.
public struct ProvisioningID: StringIdentifier {
    public let rawValue: String
    public init(_ rawValue: String) { self.rawValue = rawValue }

    /// `prv_` and 32 lowercase hex digits, as before, ordered by creation time: the first 12
    /// digits are the milliseconds since 1970 at `date`, the other 20 are 80 random bits. The
    /// audit trail's two indexes lead with the provisioning id, so ids that arrive in order add
    /// to the indexes' last pages, which a batch of commits shares, where random ids would dirty
    /// a page of each index per event (and leave the pages half full). The time says nothing the
    /// caller did not know; the 80 random bits keep ids unguessable and apart within a millisecond.
    public static func generate(at date: Date = Date()) -> ProvisioningID {
        ProvisioningID("prv_" + RandomID.timeOrderedHex128(unixMilliseconds: UInt64(max(0, (date.timeIntervalSince1970 * 1000).rounded(.down)))))
    }
}

/// Random ids for the gateway's own records and requests.
public enum RandomID {
    /// 128 bits from the system's CSPRNG as 32 lowercase hex digits (a UUID's digits without the
    /// dashes, the fixed version bits or Foundation's string round trips).
    public static func hex128() -> String {
        let words = bits128()
        return withUnsafeBytes(of: words) { Data.lowercaseHex($0) }
    }

    /// 128 bits as 32 lowercase hex digits: the low 48 bits of `unixMilliseconds` first (big-endian,
    /// so the text sorts by time until the year 10889), then 80 bits from the system's CSPRNG.
    public static func timeOrderedHex128(unixMilliseconds: UInt64) -> String {
        let (high, low) = bits128()
        // The first word: 48 bits of time, then 16 random ones, big-endian; the second: 64 random bits.
        let words = (((unixMilliseconds << 16) | (high & 0xFFFF)).bigEndian, low)
        return withUnsafeBytes(of: words) { Data.lowercaseHex($0) }
    }

    /// The kernel's random bytes, read `refillBytes` at a time: every request takes two ids (its
    /// request id and its provisioning id), and `SystemRandomNumberGenerator` makes one
    /// `getrandom` call per 8 bytes, four system calls a request. Each id still uses bytes no other
    /// id gets; only the reading is batched. Where the kernel's device cannot be read, the system
    /// generator is used as before.
    static let refillBytes = 4096
    private struct Pool {
        var bytes = [UInt8](repeating: 0, count: RandomID.refillBytes)
        var next = RandomID.refillBytes
    }
    private static let pool = Mutex(Pool())

    static func bits128() -> (UInt64, UInt64) {
        pool.withLock { pool in
            if pool.next + 16 > pool.bytes.count {
                guard refill(&pool.bytes) else {
                    var generator = SystemRandomNumberGenerator()
                    return (generator.next(), generator.next())
                }
                pool.next = 0
            }
            defer {
                // Used bytes are not kept: zeroed, so no later read of the pool sees an id's bits.
                for index in pool.next..<pool.next + 16 { pool.bytes[index] = 0 }
                pool.next += 16
            }
            return pool.bytes.withUnsafeBytes { raw in
                (raw.loadUnaligned(fromByteOffset: pool.next, as: UInt64.self),
                 raw.loadUnaligned(fromByteOffset: pool.next + 8, as: UInt64.self))
            }
        }
    }

    /// The kernel's CSPRNG, the one `getrandom(2)` and so `SystemRandomNumberGenerator` read,
    /// opened once; nil where it cannot be opened (then the system generator serves every id).
    private static let urandom = FileHandle(forReadingAtPath: "/dev/urandom")

    /// Fills `bytes` from `/dev/urandom`; false when it cannot.
    private static func refill(_ bytes: inout [UInt8]) -> Bool {
        guard let urandom else { return false }
        var filled = 0
        while filled < bytes.count {
            guard let read = try? urandom.read(upToCount: bytes.count - filled), !read.isEmpty else { return false }
            bytes.replaceSubrange(filled..<filled + read.count, with: read)
            filled += read.count
        }
        return true
    }
}
