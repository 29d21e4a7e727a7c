import Foundation
import Gateway
import ProvisioningAPI
import ProvisioningCore

/// Where a provisioning for a card and wallet would go and why, for `GET /v1/admin/routes/explain`
/// (with the live breakers) and `route explain` (offline, no breaker state). The decision is
/// `RoutingTable.explain`, the same table `ProvisioningService` routes with.
struct RouteExplainer: Sendable {
    let table: RoutingTable
    /// Each configured issuer's endpoint labels, in failover order.
    let endpoints: [IssuerID: [String]]
    let serverDeadline: Duration
    /// The wallets each configured issuer is used for.
    let wallets: [IssuerID: Set<Wallet>]
    /// `issuers.<name>.paused` as the file says (the offline answer's pause state).
    let filePaused: [IssuerID: Bool]
    /// Issuer accounts limited to some programs (`issuers.<name>.programs`).
    let issuerPrograms: [IssuerID: Set<ProgramID>]

    init(config: GatewayConfig) {
        table = config.routing.table
        endpoints = Dictionary(uniqueKeysWithValues: config.issuers.map { entry in
            (IssuerID(entry.key), entry.value.endpoints.map { EndpointLabel.render($0.url) })
        })
        serverDeadline = .milliseconds(config.server.deadlineMS)
        var wallets = UpstreamDirectory.walletsUsed(config: config)
        // The local issuer has no pause, but serves one wallet: a route to it for another is said so.
        if config.local.enabled { wallets[LocalIssuer.issuerID] = LocalIssuer.wallets }
        self.wallets = wallets
        filePaused = Dictionary(uniqueKeysWithValues: config.issuers.map { (IssuerID($0.key), $0.value.paused) })
        issuerPrograms = config.issuerPrograms
    }

    /// What a provisioning would be refused with before any call, in the order the service
    /// checks (`ProvisioningService.run`): `route explain` had shown a healthy route for a card
    /// whose issuer's account serves other programs only, or that names an issuer the file no
    /// longer has, both steps of moving a program between issuers (the CLI audit).
    func refusal(_ card: CardRecord, issuer: IssuerID?, wallet: Wallet) -> Components.Schemas.RouteExplanation.RefusedPayload? {
        guard let issuer else {
            return .init(code: .walletNotSupported, detail: "no issuer is routed for card \(card.id) and \(wallet.rawValue)")
        }
        if let allowed = issuerPrograms[issuer], !allowed.contains(card.program) {
            return .init(code: .forbidden, detail: "issuer \(issuer) does not serve program \(card.program) (issuers.\(issuer).programs)")
        }
        guard let used = wallets[issuer] else {
            return .init(code: .upstreamUnavailable, detail: "the card's issuer \(issuer) is not in this configuration (issuers.\(issuer))")
        }
        guard used.contains(wallet) else {
            return .init(code: .walletNotSupported, detail: "\(issuer) is not used for \(wallet.rawValue)")
        }
        return nil
    }

    /// `health`: the running gateway's breakers; nil offline. `pause`: the running gateway's pause
    /// state of an issuer; nil offline, where the file's `paused` is given.
    func explain(
        _ card: CardRecord, wallet: Wallet, health: [UpstreamHealth.EndpointSnapshot]?,
        pause: ((IssuerID) -> PauseSwitch.State?)? = nil
    ) -> Components.Schemas.RouteExplanation {
        let explanation = table.explain(card, wallet: wallet)
        let decidedBy: String
        var decidingRule: Components.Schemas.RouteRule?
        switch explanation.decidedBy {
        case .card: decidedBy = "card"
        case .rule(let index):
            decidedBy = "rule"
            decidingRule = Self.schema(table.rules[index], index: index)
        case .none: decidedBy = "none"
        }
        let labels = explanation.issuer.flatMap { endpoints[$0] } ?? []
        // The running gateway's view of each endpoint (its resolved address and breaker); offline, none.
        let live = { (index: Int) -> UpstreamHealth.EndpointSnapshot? in
            health?.first { $0.issuer == explanation.issuer && $0.index == index }
        }
        let breaker = { (index: Int) -> String? in health == nil ? nil : live(index)?.state ?? "closed" }
        // A configured issuer's wallets and (an upstream's) pause state; no issuer has neither.
        let configured = explanation.issuer.flatMap { issuer in wallets[issuer].map { (issuer, $0) } }
        let pauseState = configured.flatMap { issuer, _ -> PauseSwitch.State? in
            guard issuer != LocalIssuer.issuerID else { return nil }
            return pause.map { $0(issuer) } ?? filePaused[issuer].map { PauseSwitch.State(paused: $0, setBy: .config) }
        }
        return .init(
            cardId: card.id.rawValue, program: card.program.rawValue, wallet: .init(rawValue: wallet.rawValue)!,
            issuer: explanation.issuer?.rawValue, decidedBy: .init(rawValue: decidedBy)!, rule: decidingRule,
            rulesChecked: explanation.checked.map {
                .init(rule: Self.schema($0.rule, index: $0.index), matched: $0.matched, mismatches: $0.mismatches)
            },
            endpoints: labels.enumerated().map { index, label in
                .init(index: index, url: live(index)?.url ?? label, breaker: breaker(index).flatMap { .init(rawValue: $0) },
                      openUntil: live(index)?.openUntil)
            },
            fallback: explanation.fallback?.rawValue,
            deadlineMs: Int((explanation.deadline ?? serverDeadline).wholeMilliseconds),
            paused: pauseState?.paused, pausedBy: pauseState.map { "\($0.setBy)" },
            walletSupported: configured.map { $0.1.contains(wallet) },
            refused: refusal(card, issuer: explanation.issuer, wallet: wallet))
    }

    static func schema(_ rule: RoutingRule, index: Int) -> Components.Schemas.RouteRule {
        .init(index: index,
              match: .init(program: rule.program?.rawValue, cardIdPrefix: rule.cardIDPrefix, wallet: rule.wallet.flatMap { .init(rawValue: $0.rawValue) }),
              issuer: rule.issuer.rawValue, fallback: rule.fallback?.rawValue, deadlineMs: rule.deadline.map { Int($0.wholeMilliseconds) })
    }
}

/// `route explain`: the card from the configured store's registry, the routing from the file.
public enum RouteExplain {
    /// A registry read, so it is a security event (`admin_read` by `actor`, as the API's explain
    /// is), written before the answer is printed.
    public static func run(
        config path: String, cardID id: String, wallet: String, actor: String,
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) async -> ToolOutcome {
        guard InputRules.isCardID(id) else { return .failed(InputRules.cardIDRule) }
        guard let wallet = Wallet(rawValue: wallet) else { return .failed("--wallet must be apple_pay, google_pay or samsung_pay") }
        return await OperatorTools.withStore(config: path, environment: environment, migrating: false) { config, store in
            try await store.appendSecurityEvent(SecurityEvent(
                at: Date(), kind: .adminRead, actor: actor, cardID: CardID(id), detail: ["path": "route explain"]))
            guard let card = try await store.card(CardID(id)) else {
                throw GatewayError(.cardNotFound, "card \(id) is not in the registry")
            }
            let answer = RouteExplainer(config: config).explain(card, wallet: wallet, health: nil)
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            return .ok(String(decoding: try encoder.encode(answer), as: UTF8.self))
        }
    }
}
