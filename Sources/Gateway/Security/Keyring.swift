import Crypto
import Foundation
import ProvisioningCore

/// The vault's keys by id: one seals, every one opens, so keys can be rotated without a moment
/// where stored entries cannot be read (`vault rotate` re-seals them under the active key).
public struct VaultKeyring: Sendable {
    public let activeID: String
    let keys: [String: SymmetricKey]
    /// Listed keys that hold the same bytes as one listed before them, as `path: the same key as
    /// path`: a rotation onto one changes nothing while saying it did, so `vault rotate` refuses
    /// it. Not a start-up problem: entries sealed under either id must keep opening.
    public private(set) var sameKeys: [String] = []

    public init(activeID: String, keys: [String: SymmetricKey]) {
        precondition(keys[activeID] != nil, "the active key must be in the ring")
        self.activeID = activeID
        self.keys = keys
    }

    /// One key as the active `default` (tests, and `vault.key`).
    public init(_ key: SymmetricKey, id: String = VaultKeyConfig.defaultID) {
        self.init(activeID: id, keys: [id: key])
    }

    public var ids: [String] { keys.keys.sorted() }
    var activeKey: SymmetricKey { keys[activeID]! }

    /// Resolves `vault.key` / `vault.keys` from the environment; problems name their key paths.
    public static func resolve(_ config: VaultConfig, environment: [String: String]) throws(ConfigError) -> VaultKeyring {
        var keys: [String: SymmetricKey] = [:]
        var problems: [ConfigProblem] = []
        var activeID: String?
        var paths: [Data: String] = [:]
        var sameKeys: [String] = []
        for (index, entry) in config.keyring.enumerated() {
            let path = config.key != nil && index == 0 ? "vault.key" : "vault.keys[\(config.key != nil ? index - 1 : index)].key"
            do {
                // A guessable key is refused as the active one; an old key being rotated out must
                // still load, or the rotation that ends it could not run (review).
                let key = try CardVault.key(reference: entry.key, environment: environment, path: path, refusingGuessable: entry.active)
                keys[entry.id] = key
                // A rotation whose new variable holds the old key changes nothing while saying it
                // did (`vault rotate` re-sealed every entry under the same bytes; CLI audit).
                let bytes = key.withUnsafeBytes { Data($0) }
                if let first = paths[bytes] {
                    sameKeys.append("\(path) holds the same key as \(first)")
                } else {
                    paths[bytes] = path
                }
            } catch {
                problems += error.problems
            }
            if entry.active { activeID = entry.id }
        }
        guard problems.isEmpty else { throw ConfigError(source: "environment", problems: problems) }
        guard let activeID, keys[activeID] != nil else {
            throw ConfigError(source: "config", problems: [.init("vault.key", "required (env:NAME), with exactly one active key")])
        }
        var ring = VaultKeyring(activeID: activeID, keys: keys)
        ring.sameKeys = sameKeys
        return ring
    }
}

/// AES-256-GCM with the key's id in front, so an entry says which key opens it:
/// `"PGS" version(1) | id length(1) | id | nonce | ciphertext | tag`. The associated data binds
/// the bytes to what they belong to (a card; a client's Idempotency-Key); the version says which
/// binding (1: Idempotency-Key answers, and vault entries bound to their program and card id;
/// 2: vault entries bound to their card at its issuer too, `CardVault.associatedData`).
enum SealedEnvelope {
    static let magic: [UInt8] = Array("PGS".utf8)
    static let versions: ClosedRange<UInt8> = 1...2

    static func seal(_ plaintext: Data, keyID: String, key: SymmetricKey, authenticating aad: Data, version: UInt8 = 1) throws -> Data {
        let id = Array(keyID.utf8)
        precondition(id.count <= 255 && versions.contains(version))
        let box = try AES.GCM.seal(plaintext, using: key, authenticating: aad)
        return Data(magic + [version, UInt8(id.count)] + id) + box.combined!
    }

    /// The version and key id named by a sealed envelope, or nil when the bytes are not one.
    static func parse(_ sealed: Data) -> (version: UInt8, id: String, body: Data)? {
        let bytes = [UInt8](sealed.prefix(5))
        guard bytes.count == 5, Array(bytes[0..<3]) == magic, versions.contains(bytes[3]) else { return nil }
        let length = Int(bytes[4])
        guard sealed.count > 5 + length else { return nil }
        let start = sealed.startIndex + 5
        guard let id = String(bytes: sealed[start..<(start + length)], encoding: .utf8) else { return nil }
        return (bytes[3], id, Data(sealed[(start + length)...]))
    }

    /// The key id named by a version 1 envelope, or nil when the bytes are not one.
    static func keyID(of sealed: Data) -> (id: String, body: Data)? {
        guard let (version, id, body) = parse(sealed), version == 1 else { return nil }
        return (id, body)
    }

    static func open(_ body: Data, key: SymmetricKey, authenticating aad: Data) throws -> Data {
        try AES.GCM.open(try AES.GCM.SealedBox(combined: body), using: key, authenticating: aad)
    }
}

/// Seals the answers kept for Idempotency-Key replays (they hold activation data and encrypted
/// pass data) under keys derived from the vault's, bound to the client and the key.
public struct ResponseSealer: Sendable {
    let keyring: VaultKeyring
    private let derived: [String: SymmetricKey]

    public init(keyring: VaultKeyring) {
        self.keyring = keyring
        derived = keyring.keys.mapValues {
            HKDF<SHA256>.deriveKey(inputKeyMaterial: $0, info: Data("provisioning-gateway idempotency answers v1".utf8), outputByteCount: 32)
        }
    }

    static func aad(client: ClientID, key: String) -> Data { Data("idempotency\u{0}\(client.rawValue)\u{0}\(key)".utf8) }

    public func seal(_ body: Data, client: ClientID, key: String) throws -> Data {
        try SealedEnvelope.seal(body, keyID: keyring.activeID, key: derived[keyring.activeID]!, authenticating: Self.aad(client: client, key: key))
    }

    /// The stored answer. Only a sealed one is replayed: a row that is not (plain JSON, as answers
    /// were kept before sealing existed, long expired since) is not the gateway's, and replaying it
    /// would hand the caller whatever was written into the database.
    public func open(_ stored: Data, client: ClientID, key: String) throws -> Data {
        guard let (id, body) = SealedEnvelope.keyID(of: stored) else {
            throw GatewayError(.internal, "a stored answer is not sealed: it was not written by the gateway")
        }
        guard let sealingKey = derived[id] else {
            throw GatewayError(.internal, "a stored answer is sealed under a key the vault no longer has")
        }
        return try SealedEnvelope.open(body, key: sealingKey, authenticating: Self.aad(client: client, key: key))
    }
}
