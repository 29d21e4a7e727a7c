import Crypto
import Foundation
import GatewayTestSupport
@testable import Gateway
import GatewayStore
import GRDB
import ProvisioningCore
import Testing

@Suite struct CardVaultTests {
    /// A fresh store holding the cards `c1`, `c2` (program acme, local): the vault seals data only
    /// for registered cards.
    func store() async throws -> SQLiteGatewayStore {
        let path = TestDirectories.root.appendingPathComponent("vault-\(UUID().uuidString)/g.sqlite").path
        let store = try await SQLiteGatewayStore.open(path: path)
        try await store.migrate()
        try await store.importCards([Self.card("c1"), Self.card("c2")])
        return store
    }

    static func card(_ id: CardID, program: ProgramID = "acme") -> CardRecord {
        CardRecord(id: id, program: program, issuer: "local", issuerReference: IssuerReference([:]))
    }

    static let number = "4111111111111111"

    @Test func sealedAtRestAndOpenedForItsOwnCard() async throws {
        let store = try await store()
        let vault = CardVault(store: store, key: SymmetricKey(size: .bits256))
        let data = try CardData(number: Self.number, name: "Jane Doe", expiry: "08/29")
        try await vault.put(Self.card("c1"), data)
        let sealed = try #require(try await store.vaultEntry("c1"))
        #expect(!String(decoding: sealed, as: UTF8.self).contains(Self.number))
        #expect(!String(decoding: sealed, as: UTF8.self).contains("Jane"))
        #expect(try await vault.cardData(Self.card("c1")) == data)
        #expect(try await vault.cardData(Self.card("nothing")) == nil)
    }

    /// A card that is not in the registry as it was read (never registered, deleted, moved) gets
    /// no entry, and the error says so without writing anything.
    @Test func anEntryIsSealedOnlyForARegisteredCard() async throws {
        let store = try await store()
        let vault = CardVault(store: store, key: SymmetricKey(size: .bits256))
        let data = try CardData(number: Self.number, name: "J", expiry: "01/30")
        do {
            try await vault.put(Self.card("unregistered"), data)
            Issue.record("sealed for a card the registry does not hold")
        } catch let error as GatewayError {
            #expect(error.code == .cardNotFound && !error.detail.contains(Self.number))
        }
        #expect(try await store.vaultEntry("unregistered") == nil)
        await #expect(throws: GatewayError.self) { try await vault.put(Self.card("c1", program: "evil"), data) }
        #expect(try await store.vaultEntry("c1") == nil)
    }

    @Test func anEntryIsBoundToItsProgramAndCard() async throws {
        let store = try await store()
        let vault = CardVault(store: store, key: SymmetricKey(size: .bits256))
        try await vault.put(Self.card("c1"), try CardData(number: Self.number, name: "J", expiry: "01/30"))
        // The same id in another program (a card re-registered by another tenant) does not open it.
        await #expect(throws: GatewayError.self) { try await vault.cardData(Self.card("c1", program: "evil")) }
        // Nor do its bytes copied under another card id.
        try await store.putVaultEntry("c2", sealed: try #require(try await store.vaultEntry("c1")))
        await #expect(throws: GatewayError.self) { try await vault.cardData(Self.card("c2")) }
    }

    @Test func anEntrySealedUnderAnotherKeyIsAClearError() async throws {
        let store = try await store()
        try await CardVault(store: store, key: SymmetricKey(size: .bits256))
            .put(Self.card("c1"), try CardData(number: Self.number, name: "J", expiry: "01/30"))
        do {
            _ = try await CardVault(store: store, keyring: VaultKeyring(SymmetricKey(size: .bits256), id: "other")).cardData(Self.card("c1"))
            Issue.record("opened with the wrong key")
        } catch {
            #expect(error.code == .internal)
            #expect(error.detail.contains("'default'"), "names the key the entry needs: \(error.detail)")
            #expect(!error.detail.contains(Self.number))
        }
    }

    @Test func rotationReSealsEveryEntryUnderTheActiveKeyAndOldKeysOpenUntilThen() async throws {
        let store = try await store()
        let old = SymmetricKey(size: .bits256)
        let new = SymmetricKey(size: .bits256)
        let before = CardVault(store: store, keyring: VaultKeyring(old, id: "k1"))
        let cards = (0..<5).map { Self.card(CardID("card_\($0)")) }
        // Names are letters: one per card, so each entry is told apart after the rotation.
        func name(_ card: CardRecord) -> String { "N" + String(repeating: "x", count: Int(card.id.rawValue.dropFirst(5))! + 1) }
        try await store.importCards(cards)
        for card in cards { try await before.put(card, try CardData(number: Self.number, name: name(card), expiry: "01/30")) }
        // An entry of a card that is gone (left by an old version) is removed by rotation.
        try await store.putVaultEntry("orphan", sealed: Data([1, 2, 3]))

        let ring = VaultKeyring(activeID: "k2", keys: ["k1": old, "k2": new])
        let after = CardVault(store: store, keyring: ring)
        // Before rotation the old key still opens everything.
        #expect(try await after.cardData(cards[0])?.name == name(cards[0]))
        let report = await after.rotate(pageSize: 2)
        #expect(report.resealed == 5 && report.current == 0 && report.unreadable.isEmpty && report.orphansDeleted == ["orphan"])
        // Now the new key alone opens every entry; a second run has nothing to do.
        let newOnly = CardVault(store: store, keyring: VaultKeyring(new, id: "k2"))
        for card in cards { #expect(try await newOnly.cardData(card)?.name == name(card)) }
        let again = await after.rotate()
        #expect(again.resealed == 0 && again.current == 5)
        // And the old key alone opens none.
        await #expect(throws: GatewayError.self) { try await before.cardData(cards[1]) }
    }

    /// A store failure part-way stops the rotation, and its report says how far it got: the
    /// entries re-sealed until then stay so, and are counted (an interrupted rotation had left
    /// no record of what it had changed).
    @Test func anInterruptedRotationSaysHowFarItGot() async throws {
        let store = try await store()
        let old = SymmetricKey(size: .bits256)
        let cards = (0..<4).map { Self.card(CardID("card_\($0)")) }
        try await store.importCards(cards)
        let before = CardVault(store: store, keyring: VaultKeyring(old, id: "k1"))
        for card in cards { try await before.put(card, try CardData(number: Self.number, name: "N", expiry: "01/30")) }
        try await TestSQLite.queue(store.path).write { db in
            try db.execute(sql: "CREATE TRIGGER stop BEFORE UPDATE ON vault_entries WHEN old.card_id = 'card_2' BEGIN SELECT RAISE(ABORT, 'disk full'); END")
        }
        let after = CardVault(store: store, keyring: VaultKeyring(activeID: "k2", keys: ["k1": old, "k2": SymmetricKey(size: .bits256)]))
        let report = await after.rotate()
        #expect(report.resealed == 2 && report.interruptedBy?.contains("disk full") == true, "\(report)")
        try await TestSQLite.queue(store.path).write { db in try db.execute(sql: "DROP TRIGGER stop") }
        let finished = await after.rotate()
        #expect(finished.resealed == 2 && finished.current == 2 && finished.interruptedBy == nil, "\(finished)")
    }

    /// Entries in the older forms (from before key ids, bound to the card id only; envelope
    /// version 1, bound to the program and card id) still open, so an upgrade keeps the local
    /// issuer serving; `vault rotate` re-seals them in the current form, even under the active
    /// key, and start-up counts them (`olderFormCount`).
    @Test func entriesInOlderFormsOpenUntilRotationReSealsThemInTheCurrentForm() async throws {
        let store = try await store()
        let key = SymmetricKey(size: .bits256)
        let cards = [Self.card("legacy"), Self.card("versionOne")]
        try await store.importCards(cards)
        let data = try CardData(number: Self.number, name: "Old", expiry: "01/30")
        let legacy = try AES.GCM.seal(try JSONEncoder().encode(data), using: key, authenticating: Data("legacy".utf8)).combined!
        let versionOne = try SealedEnvelope.seal(try JSONEncoder().encode(data), keyID: "default", key: key,
                                                 authenticating: CardVault.programBinding(cards[1]), version: 1)
        try await store.putVaultEntry("legacy", sealed: legacy)
        try await store.putVaultEntry("versionOne", sealed: versionOne)
        let vault = CardVault(store: store, keyring: VaultKeyring(key))
        #expect(try await vault.olderFormCount() == 2)
        for card in cards { #expect(try await vault.cardData(card) == data) }
        // Older forms do not follow the card to another issuer card as the current form does not:
        // version 1 was bound to the program and id only, which the rotation ends.
        var repointed = cards[1]
        repointed.issuerReference = IssuerReference(["card_token": "other"])
        #expect(try await vault.cardData(repointed) == data)
        #expect(try await vault.keyProblem() == nil)
        let report = await vault.rotate()
        #expect(report.resealed == 2 && report.current == 0 && report.unreadable.isEmpty, "\(report)")
        #expect(try await store.vaultEntry("legacy") != legacy)
        for card in cards { #expect(try await vault.cardData(card) == data) }
        #expect(try await vault.olderFormCount() == 0)
        // Re-sealed, the entry is bound to its card at its issuer.
        await #expect(throws: GatewayError.self) { try await vault.cardData(repointed) }
        #expect(await vault.rotate().current == 2)
    }

    /// An entry is bound to its card at its issuer: the same card id re-pointed at another card
    /// (or issuer) does not open it, whatever the database says; the reference's letter case is
    /// not part of it, as the store compares references.
    @Test func anEntryIsBoundToItsCardAtItsIssuer() async throws {
        let store = try await store()
        let card = CardRecord(id: "c3", program: "acme", issuer: "bridge",
                              issuerReference: IssuerReference(["customer_id": "Cust_1", "card_account_id": "ca_1"]))
        try await store.putCard(card)
        let vault = CardVault(store: store, key: SymmetricKey(size: .bits256))
        let data = try CardData(number: Self.number, name: "J", expiry: "01/30")
        try await vault.put(card, data)
        var recased = card
        recased.issuerReference = IssuerReference(["customer_id": "CUST_1", "card_account_id": "CA_1"])
        #expect(try await vault.cardData(recased) == data)
        var other = card
        other.issuerReference = IssuerReference(["customer_id": "Cust_1", "card_account_id": "ca_2"])
        await #expect(throws: GatewayError.self) { try await vault.cardData(other) }
        var elsewhere = card
        elsewhere.issuer = "tmp"
        await #expect(throws: GatewayError.self) { try await vault.cardData(elsewhere) }
    }

    @Test func cardDataPrintsNothingOfTheCard() throws {
        let data = try CardData(number: Self.number, name: "Jane Doe", expiry: "08/29")
        var dumped = ""
        dump(data, to: &dumped)
        for text in ["\(data)", String(describing: data), String(reflecting: data), dumped, "\([data])"] {
            #expect(!text.contains(Self.number) && !text.contains("Jane"), "\(text)")
        }
    }

    @Test func aKeyComesFromTheEnvironmentAsBase64OrHex() throws {
        let key = Data((0..<32).map { UInt8($0) })
        _ = try CardVault.key(reference: "env:VK", environment: ["VK": key.base64EncodedString()], path: "vault.key")
        _ = try CardVault.key(reference: "env:VK", environment: ["VK": key.map { String(format: "%02x", $0) }.joined()], path: "vault.key")
        #expect(throws: ConfigError.self) { try CardVault.key(reference: "env:VK", environment: ["VK": "short"], path: "vault.key") }
        #expect(throws: ConfigError.self) { try CardVault.key(reference: "env:VK", environment: [:], path: "vault.key") }
    }

    /// A key anyone can guess is refused: one byte repeated (zeros, a placeholder) or the
    /// sandbox's public demo keys copied into the variable.
    @Test func aKeyAnyoneCanGuessIsRefused() throws {
        let sandbox = [CardVault.sandboxKey, LocalIssuer.sandboxActivationKey].map { $0.withUnsafeBytes { Data($0) } }
        for bytes in [Data(repeating: 0, count: 32), Data(repeating: 0x41, count: 32)] + sandbox {
            for text in [bytes.base64EncodedString(), bytes.map { String(format: "%02x", $0) }.joined()] {
                let refusal = #expect(throws: ConfigError.self) { try CardVault.key(reference: "env:VK", environment: ["VK": text], path: "vault.key") }
                #expect(refusal?.problems.first?.reason.contains("holds a key anyone can guess") == true, "\(String(describing: refusal))")
            }
        }
        // An old key being rotated out loads, so the rotation can end it; as the active key it is refused.
        let zero = Data(repeating: 0, count: 32).base64EncodedString()
        let fresh = Data((0..<32).map { UInt8($0 + 100) }).base64EncodedString()
        var config = VaultConfig()
        config.keys = [VaultKeyConfig(id: "old", key: "env:OLD"), VaultKeyConfig(id: "new", key: "env:NEW", active: true)]
        #expect(try VaultKeyring.resolve(config, environment: ["OLD": zero, "NEW": fresh]).ids == ["new", "old"].sorted())
        #expect(throws: ConfigError.self) { try VaultKeyring.resolve(config, environment: ["OLD": fresh, "NEW": zero]) }
        // Two distinct byte values are enough not to be refused for that.
        var almost = Data(repeating: 0, count: 32)
        almost[31] = 1
        _ = try CardVault.key(reference: "env:VK", environment: ["VK": almost.base64EncodedString()], path: "vault.key")
    }

    @Test func aKeyRingResolvesEveryKeyAndNamesMissingOnes() throws {
        var config = VaultConfig()
        config.keys = [VaultKeyConfig(id: "k1", key: "env:K1"), VaultKeyConfig(id: "k2", key: "env:K2", active: true)]
        let value = Data((0..<32).map { UInt8($0 + 7) }).base64EncodedString()
        let other = Data((0..<32).map { UInt8($0 + 8) }).base64EncodedString()
        let ring = try VaultKeyring.resolve(config, environment: ["K1": value, "K2": other])
        #expect(ring.activeID == "k2" && ring.ids == ["k1", "k2"])
        do {
            _ = try VaultKeyring.resolve(config, environment: ["K2": value])
            Issue.record("a missing key resolved")
        } catch {
            #expect(error.problems.map(\.path) == ["vault.keys[0].key"])
        }
        // A new variable holding the old key (as hex or base64) is named, for `vault rotate` to
        // refuse; both ids still open what they sealed.
        let hex = Data((0..<32).map { UInt8($0 + 7) }).map { String(format: "%02x", $0) }.joined()
        let same = try VaultKeyring.resolve(config, environment: ["K1": value, "K2": hex])
        #expect(same.sameKeys == ["vault.keys[1].key holds the same key as vault.keys[0].key"])
        #expect(ring.sameKeys.isEmpty)
    }

    /// A key under the right id that does not open the entries sealed under that id (another key
    /// put in the variable) is found before anything is sealed with it.
    @Test func aWrongKeyUnderAKnownIdIsFound() async throws {
        let store = try await store()
        let right = SymmetricKey(size: .bits256)
        let card = Self.card("card_k")
        try await store.putCard(card)
        try await CardVault(store: store, keyring: VaultKeyring(right)).put(card, try CardData(number: Self.number, name: "N", expiry: "01/30"))
        #expect(try await CardVault(store: store, keyring: VaultKeyring(right)).keyProblem() == nil)
        let wrong = try await CardVault(store: store, keyring: VaultKeyring(SymmetricKey(size: .bits256))).keyProblem()
        #expect(wrong?.contains("vault key 'default' opens none of the entries sealed under that id") == true, "\(String(describing: wrong))")
        // One damaged entry among good ones says nothing about the key.
        let other = Self.card("card_damaged")
        try await store.putCard(other)
        try await CardVault(store: store, keyring: VaultKeyring(right)).put(other, try CardData(number: Self.number, name: "N", expiry: "01/30"))
        var damaged = try #require(try await store.vaultEntry(other.id))
        damaged[damaged.count - 1] ^= 0xFF
        try await store.putVaultEntry(other.id, sealed: damaged)
        #expect(try await CardVault(store: store, keyring: VaultKeyring(right)).keyProblem() == nil)
        // A key whose id no entry names yet (a new one rotated in) has nothing to disagree with.
        let rotating = VaultKeyring(activeID: "k2", keys: ["default": right, "k2": SymmetricKey(size: .bits256)])
        #expect(try await CardVault(store: store, keyring: rotating).keyProblem() == nil)
    }
}
