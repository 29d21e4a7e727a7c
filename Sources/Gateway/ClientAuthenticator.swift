import ByteText
import Crypto
import Foundation
import ProvisioningCore

/// A fintech backend allowed to call the gateway, and the card programs it may use; or an ops
/// (admin) client, which manages the registry and reads `/v1/admin/...` but never provisions.
public struct Client: Sendable, Equatable {
    public let id: ClientID
    public let programs: Set<ProgramID>
    public var admin: Bool = false
    /// May activate tokens without naming a card (`clients[].activations_without_card`).
    public var activationsWithoutCard: Bool = false
    /// Requests it may have in flight at once (`clients[].max_in_flight`).
    public var maxInFlight: Int = ClientConfig.maxInFlightDefault

    public init(id: ClientID, programs: Set<ProgramID>, admin: Bool = false, activationsWithoutCard: Bool = false,
                maxInFlight: Int = ClientConfig.maxInFlightDefault) {
        self.id = id
        self.programs = programs
        self.admin = admin
        self.activationsWithoutCard = activationsWithoutCard
        self.maxInFlight = maxInFlight
    }

    /// May provision for or activate tokens of this card: only a card of the client's own programs.
    public func mayUse(_ card: CardRecord) -> Bool { !admin && programs.contains(card.program) }

    /// May read and change this card's registry record: its own programs', or any for an admin.
    public func manages(_ card: CardRecord) -> Bool { admin || programs.contains(card.program) }

    /// Whether an issuer account serving `served` (nil: every program) also serves a program that
    /// only other clients hold (`everyClientProgram`: every non-admin client's programs): an account
    /// shared with another tenant, where a token reference or a simulator's fault is not this
    /// client's alone.
    public func sharesAccount(serving served: Set<ProgramID>?, everyClientProgram: Set<ProgramID>) -> Bool {
        let othersPrograms = everyClientProgram.subtracting(programs)
        return !(served ?? othersPrograms).isDisjoint(with: othersPrograms)
    }
}

/// Checks `Authorization: Bearer <key>` against the configured SHA-256 hashes. Every stored hash
/// is compared in full, so the time taken says nothing about which bytes matched.
public struct ClientAuthenticator: Sendable {
    private let entries: [(hash: [UInt8], client: Client)]

    public init(clients: [ClientConfig]) {
        // A client's key and the previous ones it is being rotated from (`previous_api_keys_sha256`)
        // all authenticate it: the same client, so what it did under one key is its own under the next.
        entries = clients.flatMap { config in
            let client = Client(id: ClientID(config.id), programs: Set(config.programs.map { ProgramID($0) }), admin: config.admin,
                                activationsWithoutCard: config.activationsWithoutCard,
                                maxInFlight: config.maxInFlight ?? ClientConfig.maxInFlightDefault)
            return config.apiKeyHashes.compactMap { Data(hex: $0.hex).map { (Array($0), client) } }
        }
    }

    /// Longer headers are refused unhashed: no key is anywhere near this long.
    public static let maxAuthorizationBytes = 512

    public func authenticate(authorization: String?) throws(GatewayError) -> Client {
        try authenticateKey(authorization: authorization).client
    }

    /// The client a key's SHA-256 names, when this configuration still has that key.
    public func client(keyDigest: [UInt8]) -> Client? {
        var match: Client?
        for entry in entries where Self.constantTimeEqual(entry.hash, keyDigest) {
            match = entry.client
        }
        return match
    }

    /// The client and the SHA-256 of the key it presented (kept for the request, never the key:
    /// a reload while the request is received is checked against it, `client(keyDigest:)`).
    public func authenticateKey(authorization: String?) throws(GatewayError) -> (client: Client, keyDigest: [UInt8]) {
        guard let authorization, authorization.utf8.count > 7, authorization.prefix(7).lowercased() == "bearer " else {
            throw GatewayError(.unauthorized, "send the API key as 'Authorization: Bearer <key>'")
        }
        guard authorization.utf8.count <= Self.maxAuthorizationBytes else {
            throw GatewayError(.unauthorized, "the Authorization header is longer than any API key (\(Self.maxAuthorizationBytes) bytes)")
        }
        // RFC 9110 (11.4): one or more spaces after the scheme.
        let key = authorization.dropFirst(7).drop { $0 == " " }
        guard !key.isEmpty else { throw GatewayError(.unauthorized, "send the API key as 'Authorization: Bearer <key>'") }
        let presented = Array(SHA256.hash(data: Data(key.utf8)))
        guard let match = client(keyDigest: presented) else { throw GatewayError(.unauthorized, "unknown API key") }
        return (match, presented)
    }

    static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for index in a.indices { difference |= a[index] ^ b[index] }
        return difference == 0
    }
}
