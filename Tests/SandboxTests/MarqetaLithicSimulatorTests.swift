import Foundation
@testable import Sandbox
import Testing

/// Marqeta's simulator enforces the swagger's provision request schemas and HTTP Basic; Lithic's
/// enforces UPSTREAMS.md's provision request (raw key, `digital_wallet`, the leaf's PEM body).
extension SimulatorContractTests {
    static let marqetaAuth = "Basic " + Data("app:access".utf8).base64EncodedString()

    var marqeta: MarqetaSimulator { MarqetaSimulator(applicationToken: "app", accessToken: "access", cardTokens: ["mq1"]) }

    var marqetaBody: [String: Any] {
        ["card_token": "mq1", "device_type": "MOBILE_PHONE", "provisioning_app_version": "1.0",
         "certificates": [Self.der.base64EncodedString(), Self.der.base64EncodedString()],
         "nonce": Data([1, 2, 3, 4]).base64EncodedString(), "nonce_signature": Data([5, 6, 7, 8]).base64EncodedString()]
    }

    /// Token ids are unique over every card, as a transition names only the token: two cards
    /// whose tokens share their first 24 characters had got the same ids, and a transition of one
    /// card's token changed the other's (the token audit).
    @Test func marqetaTokenIdsAreUniqueOverCards() async throws {
        let tokens = MarqetaTokens()
        let first = await tokens.list(cardToken: "shared_prefix_card_token_0000_DEMO").map(\.token)
        let second = await tokens.list(cardToken: "shared_prefix_card_token_0000_ACME").map(\.token)
        #expect(Set(first).isDisjoint(with: second), "\(first) \(second)")
        #expect(await tokens.list(cardToken: "shared_prefix_card_token_0000_DEMO").map(\.token) == first, "a card keeps its ids")
        guard case .applied(let card) = await tokens.apply(token: second[0], state: "SUSPENDED") else {
            Issue.record("not applied"); return
        }
        #expect(card == "shared_prefix_card_token_0000_ACME")
        #expect(await tokens.list(cardToken: "shared_prefix_card_token_0000_DEMO").allSatisfy { $0.state == "ACTIVE" })
    }

    @Test func marqetaAnswers201WithTheDocumentedFields() async throws {
        let answer = try await withServer(marqeta.server()) { base in
            try await send("\(base)/digitalwalletprovisionrequests/applepay", headers: ["Authorization": Self.marqetaAuth], body: marqetaBody)
        }
        #expect(answer.status == 201)
        #expect(Set(answer.json.keys) == ["activation_data", "card_token", "created_time", "encrypted_pass_data", "ephemeral_public_key",
                                          "last_modified_time"])
        #expect((answer.json["ephemeral_public_key"] as? String).flatMap { Data(base64Encoded: $0) }?.count == 65)
    }

    @Test func marqetaRefusesWhatItsSchemaForbids() async throws {
        let simulator = marqeta
        try await withServer(simulator.server()) { base in
            let url = "\(base)/digitalwalletprovisionrequests/applepay"
            let swapped = "Basic " + Data("access:app".utf8).base64EncodedString()
            #expect(try await send(url, headers: ["Authorization": swapped], body: marqetaBody).status == 401)
            var cases: [(String, Any?)] = [("device_type", "PHONE"), ("device_type", nil), ("provisioning_app_version", nil),
                                           ("provisioning_app_version", String(repeating: "1", count: 51)),
                                           ("card_token", String(repeating: "c", count: 37)), ("nonce", "not base64!"),
                                           ("certificates", ["-----BEGIN CERTIFICATE-----"]), ("certificates", nil)]
            cases.append(("nonce_signature", nil))
            for (field, value) in cases {
                var body = marqetaBody
                body[field] = value
                let answer = try await send(url, headers: ["Authorization": Self.marqetaAuth], body: body)
                #expect(answer.status == 400, "\(field)")
                #expect(answer.json["error_code"] is String && answer.json["error_message"] is String)
            }
            var unknown = marqetaBody
            unknown["card_token"] = "mq_unknown"
            #expect(try await send(url, headers: ["Authorization": Self.marqetaAuth], body: unknown).status == 404)

            let google = ["card_token": "mq1", "device_type": "MOBILE_PHONE", "provisioning_app_version": "1.0",
                          "wallet_account_id": "w1", "device_id": String(repeating: "d", count: 25)]
            #expect(try await send("\(base)/digitalwalletprovisionrequests/androidpay", headers: ["Authorization": Self.marqetaAuth],
                                   body: google).status == 400)
        }
        #expect(await simulator.seen.deviceTypes.isEmpty)
    }

    var lithic: LithicSimulator { LithicSimulator(apiKey: "lk", cardTokens: ["lc1"]) }

    @Test func lithicEnforcesItsProvisionRequest() async throws {
        try await withServer(lithic.server()) { base in
            let url = "\(base)/v1/cards/lc1/provision"
            let good: [String: Any] = ["digital_wallet": "APPLE_PAY", "certificate": Self.der.base64EncodedString(),
                                       "nonce": Data([1, 2]).base64EncodedString(), "nonce_signature": Data([3, 4]).base64EncodedString()]
            let answer = try await send(url, headers: ["Authorization": "lk"], body: good)
            #expect(answer.status == 200)
            let payload = try #require(answer.json["provisioning_payload"] as? [String: String])
            #expect(Set(payload.keys) == ["activationData", "encryptedData", "ephemeralPublicKey"])

            #expect(try await send(url, headers: ["Authorization": "Bearer lk"], body: good).status == 401)
            // The PEM body with its line breaks is still the PEM body (UPSTREAMS.md leaves line breaks open).
            var wrapped = good
            wrapped["certificate"] = Self.der.base64EncodedString(options: .lineLength64Characters)
            #expect(try await send(url, headers: ["Authorization": "lk"], body: wrapped).status == 200)
            let pem = "-----BEGIN CERTIFICATE-----\n" + Self.der.base64EncodedString(options: .lineLength64Characters) + "\n-----END CERTIFICATE-----"
            let broken: [(String, Any?)] = [("certificate", pem), ("digital_wallet", "APPLEPAY"), ("nonce", nil)]
            for (field, value) in broken {
                var body = good
                body[field] = value
                #expect(try await send(url, headers: ["Authorization": "lk"], body: body).status == 400, "\(field)")
            }
            #expect(try await send("\(base)/v1/cards/unknown/provision", headers: ["Authorization": "lk"], body: good).status == 404)
            let google = ["digital_wallet": "GOOGLE_PAY", "client_device_id": "d1", "client_wallet_account_id": "w1"]
            let opc = try await send(url, headers: ["Authorization": "lk"], body: google)
            #expect(opc.status == 200 && (opc.json["provisioning_payload"] as? String).flatMap { Data(base64Encoded: $0) } != nil)
            #expect(try await send(url, headers: ["Authorization": "lk"], body: ["digital_wallet": "GOOGLE_PAY", "client_device_id": "d1"])
                .status == 400)
        }
    }
}
