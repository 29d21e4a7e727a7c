import Crypto
import Foundation
import Gateway
import Logging
import ProvisioningCore
import Sandbox

/// The three simulators the sandbox config asks for, each on its own ephemeral loopback port,
/// knowing the demo cards and holding a key made up at start-up (never written anywhere).
public struct SandboxUpstreams: Sendable {
    public let bridge: BridgeSimulator
    public let tmp: TMPSimulator
    public let crossmint: CrossmintSimulator
    let servers: [IssuerKind: SimulatorServer]
    let secrets: [IssuerKind: String]

    public init(config: GatewayConfig, logger: Logger) {
        var logger = logger
        logger.logLevel = max(logger.logLevel, .notice)
        var secrets: [IssuerKind: String] = [:]
        for kind in IssuerKind.allCases {
            secrets[kind] = "sk_sim_" + Data((0..<16).map { _ in UInt8.random(in: .min ... .max) }).lowercaseHex
        }
        self.secrets = secrets

        let routing = config.routing.table
        func cards(_ kind: IssuerKind) -> [SandboxCardConfig] {
            config.sandbox.cards.filter { card in
                routing.issuer(for: card.record, wallet: .applePay).flatMap { config.issuers[$0.rawValue] }?.kind == kind
            }
        }
        func references(_ kind: IssuerKind) -> [[String: String]] { cards(kind).map(\.issuerReference) }
        /// Card data by the issuer's own id for the card.
        func demoCards(_ kind: IssuerKind, idField: String) -> [String: DemoCard] {
            var result: [String: DemoCard] = [:]
            for card in cards(kind) {
                guard let id = card.issuerReference[idField], let data = card.card, let expiry = data.expiryParts else { continue }
                result[id] = DemoCard(number: data.number, name: data.name, expiryMonth: expiry.month, expiryYear: expiry.year)
            }
            return result
        }
        bridge = BridgeSimulator(
            apiKey: secrets[.bridge]!,
            accounts: Set(references(.bridge).map {
                BridgeSimulator.Account(customerID: $0["customer_id"] ?? "", cardAccountID: $0["card_account_id"] ?? "")
            }),
            cards: demoCards(.bridge, idField: "card_account_id"))
        let tmpAuth = config.issuers.values.first { $0.kind == .tmp }?.wire.auth
        tmp = TMPSimulator(
            token: secrets[.tmp]!,
            auth: tmpAuth.flatMap { $0.hasPrefix("header:") ? .header(String($0.dropFirst(7))) : nil } ?? .bearer,
            cardIDs: Set(references(.tmp).compactMap { $0["issuer_card_id"] }),
            cards: demoCards(.tmp, idField: "issuer_card_id"))
        crossmint = CrossmintSimulator(apiKey: secrets[.crossmint]!, cardIDs: Set(references(.crossmint).compactMap { $0["issuer_card_id"] }),
                                       cards: demoCards(.crossmint, idField: "issuer_card_id"))
        servers = [
            .bridge: bridge.server(logger: logger),
            .tmp: tmp.server(logger: logger),
            .crossmint: crossmint.server(logger: logger),
        ]
    }

    /// Serves all three until the calling task is cancelled.
    public func run() async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for server in servers.values { group.addTask { try await server.run() } }
            try await group.waitForAll()
        }
    }

    /// Each simulator's base URL and key, once all listen.
    public func endpoints() async -> [IssuerKind: SandboxUpstream] {
        var endpoints: [IssuerKind: SandboxUpstream] = [:]
        for (kind, server) in servers {
            endpoints[kind] = SandboxUpstream(baseURL: await server.baseURL(), secret: secrets[kind]!)
        }
        return endpoints
    }
}
