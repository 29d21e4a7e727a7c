import Foundation

/// The name of a kind of issuer (`bridge`, `tmp`, `crossmint`), as `issuers.<name>.kind` says it.
/// Which kinds exist is decided by the issuer catalog (`Issuers/IssuerCatalog.swift`), each kind
/// described in its own folder; the config model only carries the name.
public struct IssuerKind: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible, ExpressibleByStringLiteral {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public init(stringLiteral value: String) { self.rawValue = value }
    public var description: String { rawValue }
}

/// What the configuration and the registry need to know about one kind of issuer, without calling
/// it: what an `issuers.<name>` entry of this kind must hold and what its cards' references are.
/// Each kind's definition (in `Issuers/<Kind>/`) implements it beside its connector factory.
public protocol IssuerProfile: Sendable {
    var kind: IssuerKind { get }
    /// The names under `credentials:`, all required.
    var credentialNames: [String] { get }
    /// The issuer-reference fields a card of this kind carries: all required, no others allowed.
    var referenceFields: [String] { get }
    /// Whether sending the same provisioning request twice is harmless (an idempotency key the
    /// upstream honours, or a GET); when false, a request that may have arrived is never resent.
    var resendSafe: Bool { get }
    /// Whether it activates wallet tokens (`routing.activations.issuer` may name it).
    var activatesTokens: Bool { get }
    /// The wallets its connector provisions for (the connector's own `wallets`):
    /// `issuers.<name>.wallets` may narrow them, never add to them.
    var wallets: Set<Wallet> { get }
    /// The wallets an issuer of this kind is used for when the file names none: all of `wallets`,
    /// except those whose contract no document confirms, which serve only when
    /// `issuers.<name>.wallets` asks for them.
    var defaultWallets: Set<Wallet> { get }
    /// Problems with `issuers.<name>.wire` for this kind, each path starting with `path`.
    func wireProblems(_ wire: WireOptions, path: String) -> [ConfigProblem]
    /// Why a card of this kind cannot carry `value` as its reference `field` (a bound the issuer's
    /// contract sets, beyond the registry's own rules), or nil. The value is never repeated.
    func referenceProblem(field: String, value: String) -> String?
}

extension IssuerProfile {
    public var defaultWallets: Set<Wallet> { wallets }
    public func referenceProblem(field: String, value: String) -> String? { nil }
}

/// The issuer kinds a gateway build knows, by name.
public typealias IssuerProfiles = [IssuerKind: any IssuerProfile]
