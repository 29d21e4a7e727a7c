import ByteText
import Foundation

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

    public static func generate() -> ProvisioningID {
        ProvisioningID("prv_" + RandomID.hex128())
    }
}

/// Random ids for the gateway's own records and requests.
public enum RandomID {
    /// 128 bits from the system's CSPRNG as 32 lowercase hex digits (a UUID's digits without the
    /// dashes, the fixed version bits or Foundation's string round trips).
    public static func hex128() -> String {
        var generator = SystemRandomNumberGenerator()
        let words: (UInt64, UInt64) = (generator.next(), generator.next())
        return withUnsafeBytes(of: words) { Data.lowercaseHex($0) }
    }
}
