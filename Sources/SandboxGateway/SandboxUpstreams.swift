import Crypto
import Foundation
import Gateway
import Logging
import ProvisioningCore
import Sandbox
import ServiceLifecycle

/// The simulators the sandbox config asks for: one per distinct `sandbox://<kind>[/<name>]`
/// endpoint, each on its own ephemeral loopback port, knowing the demo cards, with one key per
/// upstream kind made up at start-up (never written anywhere). `bridge`, `tmp`, `crossmint`,
/// `marqeta` and `lithic` are the simulators behind `sandbox://<kind>`.
public struct SandboxUpstreams: Service, CustomStringConvertible {
    /// One running simulator: where it is configured, what it saw, and its fault queue.
    public struct Instance: Sendable {
        public let url: String
        public let kind: IssuerKind
        public let log: SimulatorLog
        public let faults: SimulatorFaults
        let server: SimulatorServer
    }

    public let bridge: BridgeSimulator
    public let tmp: TMPSimulator
    public let crossmint: CrossmintSimulator
    public let marqeta: MarqetaSimulator
    public let lithic: LithicSimulator
    /// By sandbox URL.
    public let instances: [String: Instance]
    let secrets: [IssuerKind: String]
    let config: GatewayConfig

    public init(config: GatewayConfig, logger: Logger) {
        var logger = logger
        logger.logLevel = max(logger.logLevel, .notice)
        self.config = config
        // One key per upstream kind, made up now and never written anywhere.
        let random = RandomID.hex128()
        func secret(_ kind: IssuerKind) -> String { "sk_sim_\(kind)_\(random)" }

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
        func makeBridge() -> BridgeSimulator {
            BridgeSimulator(
                apiKey: secret("bridge"),
                accounts: Set(references("bridge").map {
                    BridgeSimulator.Account(customerID: $0["customer_id"] ?? "", cardAccountID: $0["card_account_id"] ?? "")
                }),
                cards: demoCards("bridge", idField: "card_account_id"))
        }
        let tmpAuth: TMPSimulator.Auth
        if case .header(let name)? = config.issuers.values.first(where: { $0.kind == "tmp" })?.wire.auth {
            tmpAuth = .header(name)
        } else {
            tmpAuth = .bearer
        }
        func makeTMP() -> TMPSimulator {
            TMPSimulator(
                token: secret("tmp"),
                auth: tmpAuth,
                cardIDs: Set(references("tmp").compactMap { $0["issuer_card_id"] }),
                cards: demoCards("tmp", idField: "issuer_card_id"))
        }
        func makeCrossmint() -> CrossmintSimulator {
            CrossmintSimulator(apiKey: secret("crossmint"), cardIDs: Set(references("crossmint").compactMap { $0["issuer_card_id"] }),
                               cards: demoCards("crossmint", idField: "issuer_card_id"))
        }
        // The sandbox makes one key per kind: Marqeta's two tokens are both that key.
        func makeMarqeta() -> MarqetaSimulator {
            MarqetaSimulator(applicationToken: secret("marqeta"), accessToken: secret("marqeta"),
                             cardTokens: Set(references("marqeta").compactMap { $0["issuer_card_id"] }),
                             cards: demoCards("marqeta", idField: "issuer_card_id"))
        }
        func makeLithic() -> LithicSimulator {
            LithicSimulator(apiKey: secret("lithic"), cardTokens: Set(references("lithic").compactMap { $0["issuer_card_id"] }),
                            cards: demoCards("lithic", idField: "issuer_card_id"))
        }
        let primaryBridge = makeBridge(), primaryTMP = makeTMP(), primaryCrossmint = makeCrossmint()
        let primaryMarqeta = makeMarqeta(), primaryLithic = makeLithic()
        bridge = primaryBridge
        tmp = primaryTMP
        crossmint = primaryCrossmint
        marqeta = primaryMarqeta
        lithic = primaryLithic
        // The simulator of each issuer kind: one line per kind (the primary serves `sandbox://<kind>`,
        // further `sandbox://<kind>/<name>` endpoints get their own).
        let simulators: [IssuerKind: (_ primary: Bool) -> any SimulatedUpstream] = [
            "bridge": { $0 ? primaryBridge : makeBridge() },
            "tmp": { $0 ? primaryTMP : makeTMP() },
            "crossmint": { $0 ? primaryCrossmint : makeCrossmint() },
            "marqeta": { $0 ? primaryMarqeta : makeMarqeta() },
            "lithic": { $0 ? primaryLithic : makeLithic() },
        ]
        func makeInstance(_ url: String, _ kind: IssuerKind, primary: Bool) -> Instance? {
            guard let simulator = simulators[kind]?(primary) else { return nil }
            return Instance(url: url, kind: kind, log: simulator.log, faults: simulator.faults, server: simulator.server(logger: logger))
        }
        secrets = Dictionary(uniqueKeysWithValues: simulators.keys.map { ($0, secret($0)) })
        var all: [String: Instance] = [:]
        for kind in simulators.keys {
            let url = "sandbox://\(kind)"
            all[url] = makeInstance(url, kind, primary: true)
        }
        for issuer in config.issuers.values {
            for endpoint in issuer.endpoints where endpoint.url.hasPrefix("sandbox://") && all[endpoint.url] == nil {
                all[endpoint.url] = makeInstance(endpoint.url, issuer.kind, primary: false)
            }
        }
        instances = all
    }

    public var description: String { "sandbox simulators" }

    /// Serves every simulator until a graceful shutdown (after the gateway's server has stopped):
    /// each closes its listener, and requests it still holds (a `timeout` fault) are abandoned
    /// shortly after, not waited for: the gateway that sent them has already given up on them.
    public func run() async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for instance in instances.values { group.addTask { try await instance.server.run() } }
            try await group.waitForAll()
        }
    }

    /// Each simulator's base URL and the keys, once all listen; the config's `sandbox.faults`
    /// are queued before anyone can call.
    public func endpoints() async -> SandboxEndpoints {
        var endpoints = SandboxEndpoints(secrets: secrets)
        for (url, instance) in instances {
            endpoints.baseURLs[url] = await instance.server.baseURL()
        }
        for fault in config.sandbox.faults {
            guard let faults = faults(issuer: fault.issuer, endpoint: fault.endpoint), let mode = FaultMode(rawValue: fault.mode.rawValue) else { continue }
            await faults.add(Fault(mode: mode, count: fault.count, delay: fault.delayMS.map { .milliseconds($0) },
                                   retryAfterSeconds: fault.retryAfterSeconds))
        }
        return endpoints
    }

    /// The URL of an issuer's endpoint (0 the first), if the issuer has that endpoint.
    public func endpointURL(issuer: String, endpoint: Int = 0) -> String? {
        guard let issuerConfig = config.issuers[issuer], issuerConfig.endpoints.indices.contains(endpoint) else { return nil }
        return issuerConfig.endpoints[endpoint].url
    }

    /// The simulator behind an issuer's endpoint (0 the first), if it is a sandbox one.
    public func instance(issuer: String, endpoint: Int = 0) -> Instance? {
        endpointURL(issuer: issuer, endpoint: endpoint).flatMap { instances[$0] }
    }

    public func faults(issuer: String, endpoint: Int = 0) -> SimulatorFaults? {
        instance(issuer: issuer, endpoint: endpoint)?.faults
    }
}

/// What the sandbox needs of any simulator: what it saw, its fault queue, its server.
protocol SimulatedUpstream: Sendable {
    var log: SimulatorLog { get }
    var faults: SimulatorFaults { get }
    func server(logger: Logger) -> SimulatorServer
}

extension BridgeSimulator: SimulatedUpstream {}
extension TMPSimulator: SimulatedUpstream {}
extension CrossmintSimulator: SimulatedUpstream {}
extension MarqetaSimulator: SimulatedUpstream {}
extension LithicSimulator: SimulatedUpstream {}
