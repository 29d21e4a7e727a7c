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

@Suite struct RouteExplanationTests {
    let table = RoutingTable(rules: [
        RoutingRule(program: "acme", wallet: .googlePay, issuer: "bridge"),
        RoutingRule(cardIDPrefix: "tmp_", issuer: "tmp", deadline: .milliseconds(4_000)),
        RoutingRule(program: "acme", issuer: "crossmint", fallback: "local"),
    ])

    func card(_ id: CardID, program: ProgramID, issuer: IssuerID? = nil) -> CardRecord {
        CardRecord(id: id, program: program, issuer: issuer, issuerReference: .init([:]))
    }

    @Test func aRuleMatchNamesItAndWhyTheEarlierOnesDidNot() {
        let explanation = table.explain(card("c1", program: "acme"), wallet: .applePay)
        #expect(explanation.issuer == "crossmint")
        #expect(explanation.decidedBy == .rule(2))
        #expect(explanation.fallback == "local")
        #expect(explanation.deadline == nil)
        #expect(explanation.checked.map(\.mismatches) == [
            ["wallet is apple_pay, the rule wants google_pay"], ["card_id does not start with tmp_"], [],
        ])
    }

    @Test func theExplicitIssuerWinsAndTheFirstMatchingRuleStillGivesTheDeadline() {
        let explanation = table.explain(card("tmp_1", program: "globex", issuer: "bridge"), wallet: .applePay)
        #expect(explanation.issuer == "bridge")
        #expect(explanation.decidedBy == .card)
        #expect(explanation.deadline == .milliseconds(4_000))
        #expect(explanation.checked.count == 2)
    }

    @Test func noMatchChecksEveryRule() {
        let explanation = table.explain(card("c1", program: "globex"), wallet: .applePay)
        #expect(explanation.issuer == nil)
        #expect(explanation.decidedBy == .none)
        #expect(explanation.checked.count == 3)
        #expect(explanation.checked.allSatisfy { !$0.matched })
    }

    @Test func theExplanationAgreesWithTheTable() {
        for id: CardID in ["c1", "tmp_2"] {
            for program: ProgramID in ["acme", "globex"] {
                for wallet in Wallet.allCases {
                    let record = card(id, program: program)
                    let explanation = table.explain(record, wallet: wallet)
                    #expect(explanation.issuer == table.issuer(for: record, wallet: wallet))
                    #expect(explanation.fallback == table.fallback(for: record, wallet: wallet))
                    #expect(explanation.deadline == table.deadline(for: record, wallet: wallet))
                }
            }
        }
    }

    @Test func aRuleCoveredByAnEarlierOneIsShadowed() {
        let shadowed = RoutingTable(rules: [
            RoutingRule(program: "acme", cardIDPrefix: "c_", issuer: "bridge"),
            RoutingRule(program: "acme", cardIDPrefix: "c_9", wallet: .applePay, issuer: "tmp"),
            RoutingRule(cardIDPrefix: "c_", issuer: "tmp"),
            RoutingRule(issuer: "crossmint"),
            RoutingRule(program: "globex", issuer: "bridge"),
        ])
        #expect(shadowed.shadowingRule(of: 0) == nil)
        #expect(shadowed.shadowingRule(of: 1) == 0)
        #expect(shadowed.shadowingRule(of: 2) == nil)
        #expect(shadowed.shadowingRule(of: 3) == nil)
        #expect(shadowed.shadowingRule(of: 4) == 3)
        #expect(shadowed.shadowingRules() == [nil, 0, nil, nil, 3])
    }

    /// The one-pass answer is the definition's, rule by rule, on tables drawn from small alphabets
    /// (so that programs, wallets and prefixes collide, the empty prefix included), seeded so a
    /// failure replays.
    @Test(arguments: [1, 2, 3, 20261126])
    func everyRulesShadowIsTheDefinitions(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        for _ in 0..<200 {
            let rules = (0..<Int(random.next() % 12)).map { _ in
                RoutingRule(
                    program: [nil, "acme", "globex"][Int(random.next() % 3)],
                    cardIDPrefix: [nil, "", "c", "c_", "c_9", "d"][Int(random.next() % 6)],
                    wallet: [nil, Wallet.applePay, .googlePay][Int(random.next() % 3)], issuer: "bridge")
            }
            let table = RoutingTable(rules: rules)
            #expect(table.shadowingRules() == rules.indices.map { table.shadowingRule(of: $0) }, "\(rules)")
        }
    }
}

/// A seeded generator (SplitMix64), so a drawn case replays.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
