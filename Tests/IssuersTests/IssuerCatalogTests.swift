import Foundation
import Issuers
import ProvisioningCore
import Sandbox
import Testing

/// Each issuer kind as its folder describes it: the catalog's one line per kind, the typed
/// credentials, wire options and references, resend safety, and the factory's connector calling
/// its upstream (the simulator, over HTTP) with the typed values.
@Suite struct IssuerCatalogTests {
    @Test func theCatalogHasOneDefinitionPerKindAndTheProfilesAreTheirs() {
        let kinds = IssuerCatalog.definitions.map(\.kind)
        #expect(Set(kinds).count == kinds.count, "a kind registered twice: \(kinds)")
        #expect(Set(kinds) == [.bridge, .tmp, .crossmint, .marqeta, .lithic])
        #expect(Set(IssuerCatalog.profiles.keys) == Set(kinds))
        for definition in IssuerCatalog.definitions {
            #expect(IssuerCatalog.definition(definition.kind)?.kind == definition.kind)
            #expect(!definition.credentialNames.isEmpty && !definition.referenceFields.isEmpty)
        }
        #expect(IssuerCatalog.definition("stripe") == nil)
    }

    /// The registry holds one card per issuer and naming field (schema 014): a kind whose
    /// reference held none would be compared whole (two of its fields told apart a card the issuer
    /// reads as one), and one holding two would leave the store picking one.
    @Test func everyKindsReferenceHasExactlyOneCardNamingField() {
        for definition in IssuerCatalog.definitions {
            let naming = definition.referenceFields.filter(IssuerReference.cardNamingFields.contains)
            #expect(naming.count == 1, "\(definition.kind): \(definition.referenceFields)")
        }
        let bridge = IssuerCatalog.profiles[.bridge]?.referenceFields ?? []
        #expect(bridge.filter(IssuerReference.cardNamingFields.contains) == ["card_account_id"])
    }

    /// Resend safety is each kind's own fact (UPSTREAMS.md): Bridge honours an Idempotency-Key,
    /// Crossmint's call is a GET, TMP's POST has no idempotency key.
    @Test func resendSafetyAndActivationAreDeclaredPerKind() throws {
        let bridge = try #require(IssuerCatalog.profiles[.bridge])
        let tmp = try #require(IssuerCatalog.profiles[.tmp])
        let crossmint = try #require(IssuerCatalog.profiles[.crossmint])
        #expect(bridge.resendSafe && crossmint.resendSafe && !tmp.resendSafe)
        #expect(tmp.activatesTokens && !bridge.activatesTokens && !crossmint.activatesTokens)
        #expect(bridge.referenceFields == ["customer_id", "card_account_id"])
        #expect(tmp.referenceFields == ["issuer_card_id"] && crossmint.referenceFields == ["issuer_card_id"])
        // Marqeta's and Lithic's provisioning POSTs take no idempotency header (UPSTREAMS.md).
        let marqeta = try #require(IssuerCatalog.profiles[.marqeta])
        let lithic = try #require(IssuerCatalog.profiles[.lithic])
        #expect(!marqeta.resendSafe && !lithic.resendSafe)
        #expect(marqeta.referenceFields == ["issuer_card_id"] && lithic.referenceFields == ["issuer_card_id"])
        #expect(marqeta.credentialNames == ["application_token", "access_token"] && lithic.credentialNames == ["api_key"])
        // Both publish Samsung Pay besides Apple Pay and Google Pay (UPSTREAMS.md: Marqeta's
        // /digitalwalletprovisionrequests/samsungpay, Lithic's digital_wallet SAMSUNG_PAY).
        #expect(marqeta.wallets == [.applePay, .googlePay, .samsungPay] && lithic.wallets == [.applePay, .googlePay, .samsungPay])
        #expect(bridge.wallets.isDisjoint(with: [.samsungPay]) && tmp.wallets.isDisjoint(with: [.samsungPay]))
    }

    /// With resendSafe false, the default table never sends a POST again once it may have arrived.
    @Test(arguments: [IssuerKind.marqeta, .lithic])
    func theRetryTableNeverResendsAMarqetaOrLithicRequestThatMayHaveArrived(kind: IssuerKind) throws {
        let table = RetryDecisionTable.defaults(resendSafe: try #require(IssuerCatalog.profiles[kind]).resendSafe)
        // A 503 too: a proxy in front of the issuer answers one after the request reached it.
        for condition in [UpstreamCondition.timedOut, .connectionReset, .malformed, .status(500), .status(502), .status(503)] {
            #expect(table.decide(condition)?.action == .fail, "\(kind) \(condition)")
        }
        #expect(table.decide(.connectFailed)?.action == .failover)
        #expect(table.decide(.status(429))?.action == .retry)
    }

    /// What `issuers.<name>.wallets` may narrow is what the kind's connector serves.
    @Test func eachKindsWalletsAreItsConnectorsWallets() async throws {
        for definition in IssuerCatalog.definitions {
            let wallets = try await withUpstreamHTTP("w") { http in
                definition.makeConnector(issuer: "w", baseURL: URL(string: "https://example.invalid")!, secret: { _ in Sensitive("k") },
                                         options: WireOptions(), http: http).wallets
            }
            #expect(definition.wallets == wallets, "\(definition.kind)")
        }
        #expect(IssuerCatalog.profiles[.crossmint]?.wallets == [.applePay])
    }

    @Test func eachKindValidatesItsOwnWireOptions() {
        var encoding = WireOptions()
        encoding.encoding = .base64
        var urlSafe = WireOptions()
        urlSafe.encoding = .base64URL
        var header = WireOptions()
        header.auth = .header("X-Token")
        #expect(BridgeIssuer().wireProblems(encoding, path: "w").isEmpty)
        #expect(BridgeIssuer().wireProblems(urlSafe, path: "w").map(\.description) == ["w.encoding: must be hex or base64"])
        #expect(BridgeIssuer().wireProblems(header, path: "w").map(\.path) == ["w.auth"])
        #expect(TMPIssuer().wireProblems(header, path: "w").isEmpty)
        #expect(TMPIssuer().wireProblems(encoding, path: "w").map(\.path) == ["w.encoding"])
        #expect(CrossmintIssuer().wireProblems(header, path: "w").map(\.path) == ["w.auth"])
        #expect(CrossmintIssuer().wireProblems(WireOptions(), path: "w").isEmpty)
    }

    @Test func typedReferencesNameTheMissingFieldNeverAValue() throws {
        let complete = CardRecord(id: "c1", program: "p", issuer: "bridge",
                                  issuerReference: IssuerReference(["customer_id": "cust_9", "card_account_id": "ca_9"]))
        let reference = try BridgeReference(complete)
        #expect(reference.customerID == "cust_9" && reference.cardAccountID == "ca_9")
        let partial = CardRecord(id: "c2", program: "p", issuer: "bridge", issuerReference: IssuerReference(["customer_id": "cust_secretish"]))
        #expect(throws: GatewayError.self) { try BridgeReference(partial) }
        do {
            _ = try BridgeReference(partial)
        } catch {
            #expect(error.code == .internal)
            #expect(error.detail.contains("card_account_id") && !error.detail.contains("cust_secretish"))
        }
        #expect(try IssuerCardReference(CardRecord(id: "c3", program: "p", issuer: "tmp", issuerReference: IssuerReference(["issuer_card_id": "t1"])),
                                        kind: .tmp).issuerCardID == "t1")
    }

    /// The factory's connector speaks its kind's dialect with the typed credentials and wire
    /// options: Bridge with base64 chosen, against the Bridge simulator, and an encoding it refuses.
    @Test func theFactoryBuildsAConnectorFromTypedCredentialsAndWireOptions() async throws {
        let simulator = BridgeSimulator(apiKey: "bridge_key", accounts: [.init(customerID: "cust_1", cardAccountID: "ca_1")])
        var options = WireOptions()
        options.encoding = .base64
        let card = CardRecord(id: "c1", program: "p", issuer: "bridge",
                              issuerReference: IssuerReference(["customer_id": "cust_1", "card_account_id": "ca_1"]))
        let definition = try #require(IssuerCatalog.definition(.bridge))
        let payload = try await withSimulator(simulator.server()) { url in
            try await withUpstreamHTTP("bridge") { http in
                try await definition.makeConnector(issuer: "bridge", baseURL: url, secret: { name in Sensitive(name == "api_key" ? "bridge_key" : "?") },
                                                   options: options, http: http)
                    .provisionApplePay(try Fixtures.deviceRequest(), card: card, context: Fixtures.context(id: "prv_catalog_1"))
            }
        }
        #expect(payload.ephemeralPublicKey.value.first == 0x04)
        #expect(await simulator.log.requests.map(\.status) == [200])
        #expect(await simulator.log.requests.first?.idempotencyKey == "prv_catalog_1")
        // The wire option reaches the wire: base64url, which Bridge does not take, is refused upstream.
        var urlSafe = WireOptions()
        urlSafe.encoding = .base64URL
        let refused = await gatewayError {
            try await withSimulator(simulator.server()) { url in
                try await withUpstreamHTTP("bridge") { http in
                    try await definition.makeConnector(issuer: "bridge", baseURL: url, secret: { _ in Sensitive("bridge_key") }, options: urlSafe, http: http)
                        .provisionApplePay(try Fixtures.deviceRequest(), card: card, context: Fixtures.context(id: "prv_catalog_2"))
                }
            }
        }
        #expect(refused?.code == .upstreamRejected, "\(String(describing: refused))")
        #expect(await simulator.log.requests.last?.status == 400)
    }
}
