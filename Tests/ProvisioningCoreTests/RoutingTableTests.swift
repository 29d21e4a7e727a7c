import ProvisioningCore
import Testing

@Suite struct RoutingTableTests {
    let table = RoutingTable(rules: [
        RoutingRule(program: "acme", wallet: .googlePay, issuer: "bridge"),
        RoutingRule(cardIDPrefix: "tmp_", issuer: "tmp"),
        RoutingRule(program: "acme", issuer: "crossmint"),
    ])

    func card(_ id: CardID, program: ProgramID, issuer: IssuerID? = nil) -> CardRecord {
        CardRecord(id: id, program: program, issuer: issuer, issuerReference: .init([:]))
    }

    @Test func theRegistrysExplicitIssuerWins() {
        #expect(table.issuer(for: card("tmp_1", program: "acme", issuer: "bridge"), wallet: .applePay) == "bridge")
    }

    @Test func theFirstMatchingRuleDecides() {
        #expect(table.issuer(for: card("c1", program: "acme"), wallet: .googlePay) == "bridge")
        #expect(table.issuer(for: card("tmp_9", program: "acme"), wallet: .applePay) == "tmp")
        #expect(table.issuer(for: card("c1", program: "acme"), wallet: .applePay) == "crossmint")
    }

    @Test func noRuleNoIssuer() {
        #expect(table.issuer(for: card("c1", program: "globex"), wallet: .applePay) == nil)
        #expect(RoutingTable(rules: []).issuer(for: card("c1", program: "acme"), wallet: .applePay) == nil)
    }
}
