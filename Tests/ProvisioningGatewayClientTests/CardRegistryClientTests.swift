import Foundation
import ProvisioningGatewayClient
import Testing

extension ClientSuites {
    /// putCard, getCard, listCards and deleteCard through the generated client and the façade, and
    /// their problems as `GatewayProblem`.
    @Suite struct CardRegistryClientTests {
        @Test func aCardIsRegisteredReadListedMovedAndDeleted() async throws {
            try await SandboxServer.run { (gateways, _) async throws in
                let demo = gateways.demo
                // 201 on registration, through the generated client: the typed `created` answer.
                let created = try await demo.raw.putCard(
                    path: .init(cardId: "card_client_1"),
                    body: .json(.init(issuer: "bridge", program: "demo",
                                      issuerReference: .init(additionalProperties: ["customer_id": "cust_c1", "card_account_id": "ca_c1"])))
                ).checked().created.body.json
                #expect(created.cardId == "card_client_1")
                #expect(created.issuer == "bridge")
                #expect(created.program == "demo")
                #expect(created.issuerReference.additionalProperties == ["customer_id": "cust_c1", "card_account_id": "ca_c1"])

                // 200 on a change of issuer, through the façade.
                let moved = try await demo.registerCard("card_client_1", issuer: "tmp", program: "demo",
                                                        issuerReference: ["issuer_card_id": "tmp_card_c1"])
                #expect(moved.issuer == "tmp")
                let read = try await demo.card("card_client_1")
                #expect(read.issuer == "tmp")
                #expect(read.issuerReference.additionalProperties == ["issuer_card_id": "tmp_card_c1"])

                // One page of two, then the rest: the demo program's six sandbox cards and this one, in id order.
                let first = try await demo.raw.listCards(query: .init(limit: 2)).checked().ok.body.json
                #expect(first.cards.map(\.cardId) == ["card_bridge_demo", "card_client_1"])
                let next: String = try #require(first.nextAfter)
                let rest = try await demo.raw.listCards(query: .init(after: next)).checked().ok.body.json
                #expect(rest.cards.map(\.cardId) == ["card_crossmint_demo", "card_lithic_demo", "card_local_demo", "card_marqeta_demo", "card_tmp_demo"])
                #expect(rest.nextAfter == nil)
                let tmpOnly = try await demo.raw.listCards(query: .init(issuer: "tmp")).checked().ok.body.json
                #expect(tmpOnly.cards.map(\.cardId) == ["card_client_1", "card_tmp_demo"])

                let deleted = try await demo.raw.deleteCard(path: .init(cardId: "card_client_1")).checked()
                #expect(throws: Never.self) { try deleted.noContent }
                let gone = await problem { try await demo.card("card_client_1") }
                #expect(gone?.status == 404)
                #expect(gone?.code == "card_not_found")
                #expect(gone?.retryable == false)
            }
        }

        @Test func registryProblemsAreTypedWithTheirCodes() async throws {
            try await SandboxServer.run { (gateways, _) async throws in
                // An unknown card.
                let unknown = await problem { try await gateways.demo.card("card_nobody") }
                #expect(unknown?.status == 404 && unknown?.code == "card_not_found" && unknown?.retryable == false)
                #expect(unknown?.requestID?.isEmpty == false)

                // Another client's card does not exist for this one, read or deleted.
                #expect(try await gateways.other.card(SandboxServer.otherBridgeCard).program == "other")
                let foreign = await problem { try await gateways.demo.card(SandboxServer.otherBridgeCard) }
                #expect(foreign?.status == 404 && foreign?.code == "card_not_found")
                let foreignDelete = await problem { try await gateways.demo.deleteCard(SandboxServer.otherBridgeCard) }
                #expect(foreignDelete?.code == "card_not_found")

                // A program that is not the client's.
                let program = await problem {
                    try await gateways.demo.registerCard("card_x", issuer: "bridge", program: "other",
                                                         issuerReference: ["customer_id": "c", "card_account_id": "a"])
                }
                #expect(program?.status == 403 && program?.code == "forbidden")

                // An issuer reference another card already has.
                let taken = await problem {
                    try await gateways.demo.registerCard("card_copy", issuer: "bridge", program: "demo",
                                                         issuerReference: ["customer_id": "cust_demo_001", "card_account_id": "ca_demo_001"])
                }
                #expect(taken?.status == 409 && taken?.code == "issuer_reference_in_use" && taken?.retryable == false)

                // A bad page size is the caller's 400.
                let badLimit = await problem { try await gateways.demo.raw.listCards(query: .init(limit: 0)).checked() }
                #expect(badLimit?.status == 400 && badLimit?.code == "invalid_request")

                // A wrong key.
                let wrongKey = await problem { try await gateways.with(key: "sk_wrong").card("card_bridge_demo") }
                #expect(wrongKey?.status == 401 && wrongKey?.code == "unauthorized")
            }
        }
    }
}
