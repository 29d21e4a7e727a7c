import ByteText
import Crypto
import Foundation
import ProvisioningCore

/// Card numbers, expiry and cardholder names, sealed with AES-256-GCM under the active vault key
/// and bound to the card (associated data: its program, id, issuer and issuer reference) before
/// they reach the store; opened only for the local encryptor. An entry cannot be moved to another
/// card or program, nor kept by a card re-pointed at another card at its issuer: it would not open,
/// whatever is written into the database. Entries name their key, so rotation (`rotate()`) can
/// re-seal them one by one while every listed key still opens.
public struct CardVault: CardDataSource {
    /// The sandbox's fixed demo key: anyone can open sandbox entries, which hold test numbers only.
    public static let sandboxKey = SymmetricKey(data: SHA256.hash(data: Data("provisioning-gateway sandbox vault key (demo only)".utf8)))

    let store: any GatewayStore
    public let keyring: VaultKeyring

    public init(store: any GatewayStore, keyring: VaultKeyring) {
        self.store = store
        self.keyring = keyring
    }

    public init(store: any GatewayStore, key: SymmetricKey) {
        self.init(store: store, keyring: VaultKeyring(key))
    }

    /// `env:NAME` holding 32 bytes as base64 or hex, or `sandbox`. `refusingGuessable`: false for
    /// a key being rotated out, which must still open what it sealed for the rotation to end it.
    public static func key(reference: String, environment: [String: String], path: String,
                           refusingGuessable: Bool = true) throws(ConfigError) -> SymmetricKey {
        let resolved: SecretReference.Resolved
        do {
            resolved = try SecretReference.resolve(reference, at: path, in: environment)
        } catch {
            throw ConfigError(source: "environment", problems: [error])
        }
        guard case .value(let text) = resolved else { return sandboxKey }
        let bytes = text.value.count == 64 ? Data(hex: text.value) : Data(base64Encoded: text.value)
        guard let bytes, bytes.count == 32 else {
            throw ConfigError(source: "environment", problems: [.init(path, "\(reference.dropFirst(4)) must hold 32 bytes as base64 or hex")])
        }
        // A key anyone can guess is no key: one byte repeated (a zeroed buffer, a placeholder), or
        // the sandbox's public demo keys copied into the variable (crypto audit: all accepted).
        let known = [sandboxKey, LocalIssuer.sandboxActivationKey].map { $0.withUnsafeBytes { Data($0) } }
        if refusingGuessable && (Set(bytes).count == 1 || known.contains(bytes)) {
            throw ConfigError(source: "environment", problems: [.init(
                path, "\(reference.dropFirst(4)) holds a key anyone can guess (one byte repeated, or the sandbox's demo key): "
                    + "make one with `openssl rand -base64 32`")])
        }
        return SymmetricKey(data: bytes)
    }

    /// What an entry is bound to (envelope version 2): its card's program and id, its issuer and
    /// its reference there (the fields in key order, letter case aside, as the store compares
    /// references). A sealed entry put back under a card since re-pointed at another card at its
    /// issuer, or under an id registered again for another card, does not open (crypto audit: an
    /// old entry written back into the database had been encrypted for the new card).
    static func associatedData(_ card: CardRecord) -> Data {
        var text = "card-vault\u{0}2\u{0}\(card.program.rawValue)\u{0}\(card.id.rawValue)\u{0}\(card.issuer?.rawValue ?? "")"
        for (key, value) in card.issuerReference.fields.sorted(by: { $0.key < $1.key }) {
            text += "\u{0}\(asciiLowercased(key))=\(asciiLowercased(value))"
        }
        return Data(text.utf8)
    }

    /// The binding of envelope version 1 (program and card id), read only to re-seal.
    static func programBinding(_ card: CardRecord) -> Data {
        Data("card-vault\u{0}\(card.program.rawValue)\u{0}\(card.id.rawValue)".utf8)
    }

    private static func asciiLowercased(_ text: String) -> String {
        String(decoding: text.utf8.map { (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0) ? $0 | 0x20 : $0 }, as: UTF8.self)
    }

    /// The envelope version of entries sealed now.
    static let sealingVersion: UInt8 = 2

    /// Seals `data` for `card`, which must be in the registry (an entry never exists without its
    /// card); `event` (the CLI's) is written in the same transaction.
    public func put(_ card: CardRecord, _ data: CardData, event: SecurityEvent? = nil) async throws {
        guard try await store.putVaultEntry(for: card, sealed: try seal(data, for: card), event: event) else {
            throw GatewayError(.cardNotFound, "card \(InputRules.short(card.id.rawValue)) was deleted or moved while its data was being sealed; nothing was written")
        }
    }

    /// `data` sealed under the active key, bound to `card`.
    private func seal(_ data: CardData, for card: CardRecord) throws -> Data {
        try SealedEnvelope.seal(JSONEncoder().encode(data), keyID: keyring.activeID, key: keyring.activeKey,
                                authenticating: Self.associatedData(card), version: Self.sealingVersion)
    }

    @discardableResult
    public func delete(_ id: CardID, event: SecurityEvent? = nil) async throws -> Bool {
        try await store.deleteVaultEntry(id, event: event)
    }

    public func cardData(_ card: CardRecord) async throws(GatewayError) -> CardData? {
        let sealed: Data?
        do {
            sealed = try await store.vaultEntry(card.id)
        } catch {
            throw GatewayError(.internal, "the vault could not be read", cause: error)
        }
        guard let sealed else { return nil }
        // Older forms still open, so that an upgrade does not stop the local issuer until `vault
        // rotate` has run (start-up warns when it finds some; rotation re-seals them).
        return try open(sealed, card: card).data
    }

    /// Checks the listed keys against the entries sealed under their ids, up to `sample` entries:
    /// a key whose id an entry names but which does not open it is the wrong key under a right id
    /// (another key put in the variable, both `default`), and sealing under it would make entries
    /// no other instance opens (`vault put` accepted one; CLI audit). Only a key that opens none
    /// of the sampled entries naming it is wrong: one entry that does not open (damaged, or its
    /// card moved while it was read) says nothing about the key. Nil when none disagrees.
    public func keyProblem(sample: Int = 50) async throws -> String? {
        var opened: Set<String> = []
        var refused: [String: CardID] = [:]
        for id in try await store.vaultCardIDs(after: nil, limit: sample) {
            guard let sealed = try await store.vaultEntry(id), let (_, keyID, _) = SealedEnvelope.parse(sealed),
                  keyring.keys[keyID] != nil, !opened.contains(keyID), let card = try await store.card(id) else { continue }
            if (try? open(sealed, card: card)) != nil {
                opened.insert(keyID)
                refused[keyID] = nil
            } else if refused[keyID] == nil {
                refused[keyID] = id
            }
        }
        guard let (keyID, id) = refused.sorted(by: { $0.key < $1.key }).first else { return nil }
        return "vault key '\(keyID)' opens none of the entries sealed under that id (card \(InputRules.short(id.rawValue)) among them): the "
            + "environment holds another key under it; put the key those entries were sealed with back, or rotate under a new id"
    }

    /// How many of the first `sample` entries are in an older form (bound to less than their card
    /// at its issuer), for start-up's warning: `vault rotate` re-seals them.
    public func olderFormCount(sample: Int = 50) async throws -> Int {
        var count = 0
        for id in try await store.vaultCardIDs(after: nil, limit: sample) {
            guard let sealed = try await store.vaultEntry(id) else { continue }
            if SealedEnvelope.parse(sealed)?.version != Self.sealingVersion { count += 1 }
        }
        return count
    }

    /// The entry's data, the id of the key that opened it, and whether it is in the current form.
    /// An entry of an earlier version, bound to less than its card at its issuer (envelope version
    /// 1, or from before key ids), still opens until `vault rotate` re-seals it: refusing them
    /// would stop the local issuer from an upgrade until the rotation, with no rollout that keeps
    /// it serving (review). Their weaker binding is what the rotation ends.
    func open(_ sealed: Data, card: CardRecord) throws(GatewayError) -> (data: CardData, keyID: String, current: Bool) {
        do {
            if let (version, id, body) = SealedEnvelope.parse(sealed) {
                guard let key = keyring.keys[id] else {
                    throw GatewayError(.internal, "the vault entry for card \(card.id) is sealed under key '\(id)', which vault.keys no longer lists")
                }
                let current = version == Self.sealingVersion
                let opened = try SealedEnvelope.open(body, key: key, authenticating: current ? Self.associatedData(card) : Self.programBinding(card))
                return (try JSONDecoder().decode(CardData.self, from: opened), id, current)
            }
            // An entry from before key ids (bound to the card id only): any listed key may open it
            // until `vault rotate` re-seals it in the current form.
            for id in keyring.ids {
                if let opened = try? AES.GCM.open(try AES.GCM.SealedBox(combined: sealed), using: keyring.keys[id]!,
                                                   authenticating: Data(card.id.rawValue.utf8)) {
                    return (try JSONDecoder().decode(CardData.self, from: opened), "legacy:\(id)", false)
                }
            }
        } catch let error as GatewayError {
            throw error
        } catch {}
        throw GatewayError(.internal, "the vault keys do not open the entry for card \(card.id): it was sealed under another key or for another card")
    }

    public struct RotationReport: Sendable, Equatable {
        /// Entries re-sealed under the active key.
        public var resealed = 0
        /// Entries changed or deleted while they were re-sealed (a new card number put, the card
        /// deleted or moved): left as that change made them, never overwritten with the old data.
        public var changedMeanwhile: [CardID] = []
        /// Entries already under the active key.
        public var current = 0
        /// Entries no listed key opens (left as they are).
        public var unreadable: [CardID] = []
        /// Entries whose card no longer exists (deleted).
        public var orphansDeleted: [CardID] = []
        /// Why the rotation stopped before the last entry (the store failed), or nil: what it did
        /// up to there is in the counts above, and is kept.
        public var interruptedBy: String?
        public init() {}
    }

    /// Re-seals every entry under the active key and in the current form, page by page. Old keys
    /// can be removed from `vault.keys` once this reports no unreadable entries.
    /// A store failure part-way stops it, and the report says how far it got (`interruptedBy`):
    /// the entries re-sealed until then stay re-sealed, and the caller records that much (an
    /// interrupted rotation had left no record of the entries it had changed; CLI audit).
    public func rotate(pageSize: Int = 500) async -> RotationReport {
        var report = RotationReport()
        do {
            try await rotate(pageSize: pageSize, into: &report)
        } catch {
            report.interruptedBy = "\(error)"
        }
        return report
    }

    private func rotate(pageSize: Int, into report: inout RotationReport) async throws {
        var after: CardID?
        while true {
            let ids = try await store.vaultCardIDs(after: after, limit: pageSize)
            for id in ids {
                guard let card = try await store.card(id) else {
                    // Only while still without a card: one registered meanwhile keeps its entry.
                    if try await store.deleteOrphanVaultEntry(id) { report.orphansDeleted.append(id) }
                    continue
                }
                guard let sealed = try await store.vaultEntry(id) else { continue }
                let opened: (data: CardData, keyID: String, current: Bool)
                do {
                    opened = try open(sealed, card: card)
                } catch {
                    report.unreadable.append(id)
                    continue
                }
                // Under the active key and in the current form: nothing to do. An older form under
                // the active key is re-sealed too.
                if opened.keyID == keyring.activeID && opened.current {
                    report.current += 1
                    continue
                }
                // Swapped in only over the bytes just read: the gateway keeps serving meanwhile,
                // and a new number put, or the card deleted or moved, must not be undone.
                if try await store.replaceVaultEntry(id, expected: sealed, with: try seal(opened.data, for: card)) {
                    report.resealed += 1
                } else {
                    report.changedMeanwhile.append(id)
                }
            }
            guard ids.count == pageSize else { return }
            after = ids.last
        }
    }
}
