import Gateway
@testable import GatewayServer
import GatewayTestSupport
import ProvisioningCore
import Testing

/// `route explain` says when a provisioning would be refused before any call, in the service's
/// own order (the CLI audit: it had shown a healthy route for a card whose issuer's account
/// serves other programs only, and for a card whose issuer the file no longer has).
struct RouteExplainerTests {
    static func card(_ program: String, issuer: String?) -> CardRecord {
        CardRecord(id: "card_r1", program: ProgramID(program), issuer: issuer.map { IssuerID($0) },
                   issuerReference: IssuerReference(["customer_id": "c1", "card_account_id": "a1"]))
    }

    @Test func aRefusalBeforeAnyCallIsNamedWithTheProblemItWouldAnswer() throws {
        var config = try SandboxTestConfig.config()
        config.issuers["bridge"]!.programs = ["other"]
        let explainer = RouteExplainer(config: config)

        let foreign = explainer.explain(Self.card("demo", issuer: "bridge"), wallet: .applePay, health: nil)
        #expect(foreign.refused?.code == .forbidden && foreign.refused?.detail.contains("does not serve program demo") == true, "\(foreign)")
        #expect(explainer.explain(Self.card("other", issuer: "bridge"), wallet: .applePay, health: nil).refused == nil)

        let gone = explainer.explain(Self.card("demo", issuer: "stripe"), wallet: .applePay, health: nil)
        #expect(gone.refused?.code == .upstreamUnavailable && gone.refused?.detail.contains("not in this configuration") == true, "\(gone)")

        // Crossmint provisions Apple Pay only.
        let crossmint = explainer.explain(Self.card("demo", issuer: "crossmint"), wallet: .googlePay, health: nil)
        #expect(crossmint.refused?.code == .walletNotSupported && crossmint.walletSupported == false, "\(crossmint)")

        let unrouted = explainer.explain(Self.card("demo", issuer: nil), wallet: .applePay, health: nil)
        #expect(unrouted.issuer == nil && unrouted.refused?.code == .walletNotSupported, "\(unrouted)")
    }
}
