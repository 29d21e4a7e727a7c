import Crypto
import Foundation
import GatewayTestSupport
import Gateway
import GatewayServer
import GRDB
import Hummingbird
import HTTPTypes
import HummingbirdTesting
import NIOCore
import ProvisioningCore
import Sandbox
import Synchronization
import Testing

/// `POST /v1/admin/config/reload` against a live sandbox gateway started from a file the test
/// rewrites (SIGHUP against the real executable is in `ReloadCommandLineTests`).
@Suite struct ConfigReloadTests {
    /// The sandbox file in a directory of its own, rewritten by each step of a test.
    struct ReloadableFile {
        let directory: URL
        var file: URL { directory.appendingPathComponent("gateway.yaml") }
        static let base = try! String(contentsOf: GatewayHarness.packageRoot.appendingPathComponent("Config/gateway.yaml"), encoding: .utf8)
            .replacingOccurrences(of: "anchors: [sandbox/", with: "anchors: [\(GatewayHarness.packageRoot.path)/Config/sandbox/")

        init(_ edit: (String) throws -> String = { $0 }) throws {
            directory = TestDirectories.root.appendingPathComponent("reload-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            try write(edit)
        }

        /// The sandbox file with `edit` applied; an edit that finds nothing to change fails the test.
        func write(_ edit: (String) throws -> String) throws {
            try Data(try edit(Self.base).utf8).write(to: file)
        }

        func write(raw text: String) throws { try Data(text.utf8).write(to: file) }

        var sha256: String { SHA256.hash(data: try! Data(contentsOf: file)).map { String(format: "%02x", $0) }.joined() }
        var source: ConfigSource { ConfigSource(path: file.path) { $0.server.port = 0 } }

        func config() throws -> GatewayConfig {
            var config = try ConfigLoader.load(path: file.path)
            config.server.port = 0
            return config
        }

        func remove() { try? FileManager.default.removeItem(at: directory) }
    }

    static func replacing(_ old: String, _ new: String) -> @Sendable (String) throws -> String {
        { text in
            try #require(text.contains(old), "Config/gateway.yaml no longer has \(old.debugDescription)")
            return text.replacingOccurrences(of: old, with: new)
        }
    }

    /// demo's key revoked (401 after it), its key now another client's (401: with the same
    /// programs and rights, that client is still not the one the request was for), or its program
    /// moved away (404 for its card after it): the file's text before and after, and what a
    /// request of demo's hears.
    static let revokedOrMoved: [(old: String, new: String, status: Int, code: String)] = [
        ("api_key_sha256: 1a2ac1341df9c063a0e169f53446988d5374273383dbaa08b678dbb584cea68d",
         "api_key_sha256: \(String(repeating: "ab", count: 32))", 401, "unauthorized"),
        ("  - id: demo\n", "  - id: demo_successor\n", 401, "unauthorized"),
        // (`activations_without_card` goes too: the activation account serves program demo.)
        ("    programs: [demo]\n    # May call", "    programs: [elsewhere]\n    activations_without_card: false\n    # May call", 404,
         "card_not_found"),
    ]

    /// Waits (polling, briefly) until the simulators' queued fault was taken: the request is at the issuer.
    static func waitUntilTheFaultIsTaken(_ client: GatewayClient, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        var taken = false
        for _ in 0..<500 where !taken {
            taken = (try await CardRegistryAPITests.send(client, .get, "/v1/sandbox/faults", key: GatewayHarness.opsKey).json["faults"] as? [Any])?.isEmpty == true
            if !taken { try await Task.sleep(for: .milliseconds(5)) }
        }
        try #require(taken, "the request never reached the simulator", sourceLocation: sourceLocation)
    }

    /// On a sandbox gateway of its own: a keyed request held at Bridge by `fault`, its duplicate
    /// sent while it runs and found waiting for the key's claim (the store answered the key's
    /// second claim: held), and the file changed by `edit` and reloaded meanwhile: both answers,
    /// and the statuses Bridge answered. (A duplicate that arrived after the reload would be
    /// refused at the door with the same status: the wait is made sure of, not slept for.)
    ///
    /// The gateway's clock is a `TestClock` that moves only once the reload is done, so the
    /// first request's wait before its retry (`firstWaits`, the Retry-After `fault` asks for; nil
    /// when it waits for nothing but Bridge) and the duplicate's polls for the key end after the
    /// reload whatever the machine's speed, instead of within a real-time window. The first is
    /// let go and answered first (the step past its wait also ends the duplicate's poll then
    /// under way, which finds the key still held); then the clock runs on for the duplicate.
    /// With `fault` nil, the first request is held by Bridge alone (a `slow` fault with a gate),
    /// let go once the reload is done.
    static func duplicateAcrossAReload(
        fault: String?, gatedMode: FaultMode = .slow, firstWaits: Duration? = nil, key: String,
        edit: @escaping @Sendable (String) throws -> String, store given: LostAcknowledgementStore? = nil
    ) async throws -> (first: GatewayResponse, duplicate: GatewayResponse, bridge: [Int]) {
        let file = try ReloadableFile()
        defer { file.remove() }
        let store: LostAcknowledgementStore
        if let given { store = given } else { store = LostAcknowledgementStore(try await GatewayHarness.temporaryStore()) }
        let clock = TestClock()
        let outcome = Mutex<(first: GatewayResponse, duplicate: GatewayResponse, bridge: [Int])?>(nil)
        try await GatewayHarness.run(config: try file.config(), configSource: file.source, store: store, clock: clock) { client, sandbox in
            let gate = FaultGate()
            if let fault {
                try await ResilienceTests.addFault(client, fault)
            } else {
                await sandbox.faults(issuer: "bridge")?.add(Fault(mode: gatedMode, count: 1, gate: gate))
            }
            let send = keyedProvisioning(port: client.port, key: key)
            async let first = send()
            try await waitUntilTheFaultIsTaken(client)
            #expect(store.claims(of: key) == 1)
            async let duplicate = send()
            for _ in 0..<2000 where store.claims(of: key) < 2 { try await Task.sleep(for: .milliseconds(1)) }
            try #require(store.claims(of: key) >= 2, "the duplicate never found the key held")
            try file.write(edit)
            let reloaded = try await reload(client)
            #expect(reloaded.status == .ok && reloaded.json["changed"] as? [String] == ["clients"], "\(String(buffer: reloaded.body))")
            if let firstWaits {
                // Once the first sleeps (the duplicate's one poll is all else that does), its wait ends.
                for _ in 0..<1000 where !clock.requestedSleeps.contains(firstWaits) { try await Task.sleep(for: .milliseconds(5)) }
                try #require(clock.requestedSleeps.contains(firstWaits), "the first request never waited \(firstWaits)")
                clock.advance(by: firstWaits)
            }
            gate.open()
            let firstAnswer = try await first
            // Then the duplicate's polls (the purge job's 10-minute interval is left alone).
            let driver = Task {
                while !Task.isCancelled { _ = await clock.advanceToNextSleeper(upTo: .seconds(120), limit: .seconds(3_600)) }
            }
            defer { driver.cancel() }
            let answers = (firstAnswer, try await duplicate)
            let bridge = await sandbox.bridge.log.requests.map(\.status)
            outcome.withLock { $0 = (answers.0, answers.1, bridge) }
        }
        return try #require(outcome.withLock { $0 })
    }

    /// demo's Apple Pay provisioning of `card_bridge_demo` under `key`, each call on a connection of its own.
    static func keyedProvisioning(port: Int, key: String) -> @Sendable () async throws -> GatewayResponse {
        {
            let body = ByteBuffer(bytes: try GatewayHarness.requestBody())
            let headers: HTTPFields = [.contentType: "application/json", .authorization: "Bearer \(GatewayHarness.demoKey)",
                                       HTTPField.Name("Idempotency-Key")!: key]
            return try await GatewayClient.with(port: port) { own in
                try await own.execute(uri: "/v1/cards/card_bridge_demo/wallet-provisioning/apple-pay", method: .post, headers: headers, body: body)
            }
        }
    }

    static func revokingOrMoving(_ old: String, _ new: String) -> @Sendable (String) throws -> String {
        { text in
            try replacing(old, new)(new.contains("activations_without_card") ? try replacing("    activations_without_card: true\n", "")(text) : text)
        }
    }

    /// A third client, `reloaded` (key `sk_reload_new`), for the demo program.
    static let newClientKey = "sk_reload_new"
    static let addNewClient: @Sendable (String) throws -> String = replacing("clients:\n", """
        clients:
          - id: reloaded
            api_key_sha256: \(SHA256.hash(data: Data(newClientKey.utf8)).map { String(format: "%02x", $0) }.joined())
            programs: [demo]

        """)

    static func reload(_ client: GatewayClient, key: String = GatewayHarness.opsKey) async throws -> GatewayResponse {
        try await CardRegistryAPITests.send(client, .post, "/v1/admin/config/reload", key: key)
    }

    static func metric(_ client: GatewayClient, _ line: String) async throws -> Double? {
        let text = String(buffer: try await client.execute(uri: "/metrics", method: .get).body)
        return text.split(separator: "\n").first { $0.hasPrefix(line + " ") }.flatMap { Double($0.split(separator: " ").last!) }
    }

    static func auditEvents(_ client: GatewayClient, kind: String) async throws -> [[String: Any]] {
        try await CardRegistryAPITests.send(client, .get, "/v1/admin/audit?kind=\(kind)", key: GatewayHarness.opsKey).json["events"] as? [[String: Any]] ?? []
    }

    @Test func aNewClientWorksAfterAReloadAndTheReloadIsAudited() async throws {
        let file = try ReloadableFile()
        defer { file.remove() }
        try await GatewayHarness.run(config: try file.config(), configSource: file.source) { client, _ in
            let body = try GatewayHarness.requestBody()
            #expect(try await GatewayHarness.provision(client, card: "card_bridge_demo", body: body, key: Self.newClientKey).status == .unauthorized)

            try file.write(Self.addNewClient)
            let reloaded = try await Self.reload(client)
            #expect(reloaded.status == .ok, "\(String(buffer: reloaded.body))")
            #expect(reloaded.json["result"] as? String == "applied")
            #expect(reloaded.json["generation"] as? Int == 2)
            #expect(reloaded.json["file_sha256"] as? String == file.sha256)
            #expect(reloaded.json["changed"] as? [String] == ["clients"])
            #expect(reloaded.json["restart_required"] as? [String] == [])

            let answer = try await GatewayHarness.provision(client, card: "card_bridge_demo", body: body, key: Self.newClientKey)
            #expect(answer.status == .ok, "\(String(buffer: answer.body))")
            // The clients of the first file still work.
            #expect(try await GatewayHarness.provision(client, card: "card_bridge_demo", body: body).status == .ok)

            let events = try await Self.auditEvents(client, kind: "config_reloaded")
            #expect(events.count == 1)
            let detail = try #require(events.first?["detail"] as? [String: String])
            #expect(events.first?["actor"] as? String == "ops")
            #expect(detail["file_sha256"] == file.sha256)
            #expect(detail["generation"] == "2")
            // Which process reloaded: one instance of several on a store.
            #expect(detail["instance"]?.hasSuffix(" pid \(getpid())") == true, "\(detail)")
            #expect(try await Self.metric(client, #"gateway_config_reloads_total{result="success"}"#) == 1)
            #expect(try await Self.metric(client, "gateway_config_generation") == 2)
            #expect(try await Self.metric(client, "gateway_config_reload_failing") == 0)
        }
    }

    @Test func aBrokenFileChangesNothingAndIsCountedAndAudited() async throws {
        let file = try ReloadableFile()
        defer { file.remove() }
        try await GatewayHarness.run(config: try file.config(), configSource: file.source) { client, _ in
            let body = try GatewayHarness.requestBody()
            // A client whose key hash is not hex, an issuer of no kind, a rule naming an unknown issuer,
            // and a new client that would have worked: none of it is applied.
            try file.write { text in
                try Self.addNewClient(try Self.replacing(
                    "api_key_sha256: 1a2ac1341df9c063a0e169f53446988d5374273383dbaa08b678dbb584cea68d",
                    "api_key_sha256: not-hex")(try Self.replacing("  rules: []", "  rules:\n    - { match: { program: demo }, issuer: nowhere }")(text)))
            }
            let refused = try await Self.reload(client)
            #expect(refused.status == .unprocessableContent)
            #expect(refused.json["code"] as? String == "config_invalid")
            let detail = try #require(refused.json["detail"] as? String)
            #expect(detail.contains("clients[1].api_key_sha256"), "\(detail)")
            #expect(detail.contains("routing.rules[0].issuer"), "\(detail)")
            #expect(detail.contains("nothing was changed"))

            // The old clients work, the new one does not exist.
            #expect(try await GatewayHarness.provision(client, card: "card_bridge_demo", body: body).status == .ok)
            #expect(try await GatewayHarness.provision(client, card: "card_bridge_demo", body: body, key: Self.newClientKey).status == .unauthorized)

            // A file that is not YAML at all is refused the same way.
            try file.write(raw: "clients: [unclosed\n")
            #expect(try await Self.reload(client).json["code"] as? String == "config_invalid")

            #expect(try await Self.metric(client, #"gateway_config_reloads_total{result="failure"}"#) == 2)
            #expect(try await Self.metric(client, "gateway_config_generation") == 1)
            // Until a reload is applied, the file on disk is one the next start-up would refuse.
            #expect(try await Self.metric(client, "gateway_config_reload_failing") == 1)
            let events = try await Self.auditEvents(client, kind: "config_reload_failed")
            #expect(events.count == 2)
            #expect((events.last?["detail"] as? [String: String])?["file_sha256"] == file.sha256)
            #expect(try await Self.auditEvents(client, kind: "config_reloaded").isEmpty)
        }
    }

    /// A setting that takes a restart is checked as written: naming a variable the environment
    /// lacks (the vault key) or a file that is not there (a trust anchor) refuses the reload, as
    /// start-up would refuse the file, instead of applying the rest and failing the next restart.
    @Test func aRestartOnlySettingThatCouldNotStartRefusesTheReload() async throws {
        let file = try ReloadableFile()
        defer { file.remove() }
        try await GatewayHarness.run(config: try file.config(), configSource: file.source) { client, _ in
            for edit in [Self.replacing("vault:\n  key: sandbox", "vault:\n  key: env:GATEWAY_TEST_NO_SUCH_VARIABLE"),
                         Self.replacing("anchors: [", "anchors: [/nonexistent/anchor.pem, ")] {
                try file.write { try Self.addNewClient(try edit($0)) }
                let refused = try await Self.reload(client)
                #expect(refused.status == .unprocessableContent && refused.json["code"] as? String == "config_invalid",
                        "\(String(buffer: refused.body))")
                let detail = refused.json["detail"] as? String ?? ""
                #expect(detail.contains("vault.key") || detail.contains("trust.anchors"), "\(detail)")
            }
            #expect(try await GatewayHarness.provision(client, card: "card_bridge_demo", body: try GatewayHarness.requestBody(),
                                                       key: Self.newClientKey).status == .unauthorized, "the rest of the file was applied")
            #expect(try await Self.metric(client, "gateway_config_generation") == 1)
        }
    }

    /// Reloads run one at a time: many at once each get a generation of their own, each audited
    /// once under it (all had claimed the same next number, and a file replaced between two could
    /// be undone by the second).
    @Test func concurrentReloadsRunOneAtATime() async throws {
        let file = try ReloadableFile()
        defer { file.remove() }
        try await GatewayHarness.run(config: try file.config(), configSource: file.source) { client, _ in
            // Each on a connection of its own: one connection would send them one after another.
            let generations = try await withThrowingTaskGroup(of: Int?.self) { group in
                for _ in 0..<12 {
                    group.addTask { try await GatewayClient.with(port: client.port) { try await Self.reload($0).json["generation"] as? Int } }
                }
                return try await group.reduce(into: [Int?]()) { $0.append($1) }
            }
            #expect(generations.compactMap { $0 }.sorted() == Array(2...13), "\(generations)")
            let audited = try await Self.auditEvents(client, kind: "config_reloaded")
                .compactMap { ($0["detail"] as? [String: String])?["generation"] }
            #expect(audited.count == 12 && Set(audited).count == 12, "\(audited)")
            #expect(try await Self.metric(client, "gateway_config_generation") == 13)
        }
    }

    @Test func onlyAdminClientsReloadAndAGatewayWithoutAFileRefuses() async throws {
        let file = try ReloadableFile()
        defer { file.remove() }
        try await GatewayHarness.run(config: try file.config(), configSource: file.source) { client, _ in
            let forbidden = try await Self.reload(client, key: GatewayHarness.demoKey)
            #expect(forbidden.status == .forbidden)
            #expect(try await Self.reload(client, key: "sk_wrong").status == .unauthorized)
        }
        try await GatewayHarness.run { client, _ in
            let refused = try await Self.reload(client)
            #expect(refused.status == .unprocessableContent && refused.json["code"] as? String == "operation_not_supported",
                    "\(String(buffer: refused.body))")
            #expect((refused.json["detail"] as? String)?.contains("not started from a config file") == true)
        }
    }

    /// A good file whose `config_reloaded` event cannot be written is not applied, and the answer
    /// says the gateway failed (500 `internal`), not that the file has problems (422
    /// `config_invalid` had sent an operator looking for a mistake in a valid file).
    @Test func aReloadWhoseAuditEventCannotBeWrittenIsTheGatewaysFailure() async throws {
        let file = try ReloadableFile()
        defer { file.remove() }
        let store = try await GatewayHarness.temporaryStore()
        try await GatewayHarness.run(config: try file.config(), configSource: file.source, store: store) { client, _ in
            try file.write(Self.addNewClient)
            let database = try TestSQLite.queue(store.path)
            try await database.write { db in
                try db.execute(sql: """
                    CREATE TRIGGER refuse_reload BEFORE INSERT ON security_events WHEN NEW.kind = 'config_reloaded'
                    BEGIN SELECT RAISE(ABORT, 'refused'); END
                    """)
            }
            let failed = try await Self.reload(client)
            #expect(failed.status == .internalServerError && failed.json["code"] as? String == "internal", "\(String(buffer: failed.body))")
            #expect((failed.json["detail"] as? String)?.contains("the audit event could not be written") == true)
            #expect(try await GatewayHarness.provision(client, card: "card_bridge_demo", body: try GatewayHarness.requestBody(),
                                                       key: Self.newClientKey).status == .unauthorized, "the file was applied")
            try await database.write { db in try db.execute(sql: "DROP TRIGGER refuse_reload") }
            let applied = try await Self.reload(client)
            #expect(applied.status == .ok, "\(String(buffer: applied.body))")
        }
    }

    @Test func settingsThatTakeARestartAreReportedAndKept() async throws {
        let file = try ReloadableFile()
        defer { file.remove() }
        try await GatewayHarness.run(config: try file.config(), configSource: file.source) { client, _ in
            try file.write { text in
                try Self.replacing("  deadline_ms: 15000", "  deadline_ms: 12000\n  read_timeout_ms: 7000")(
                    try Self.replacing("vault:\n  key: sandbox", "vault:\n  key: sandbox\nstore:\n  sqlite: { path: /tmp/elsewhere.sqlite }")(text))
            }
            let answer = try await Self.reload(client)
            #expect(answer.status == .ok, "\(String(buffer: answer.body))")
            #expect(Set(answer.json["restart_required"] as? [String] ?? []) == ["server.read_timeout_ms", "store"])
            #expect(answer.json["changed"] as? [String] == ["server.deadline_ms"])
            // The live part took effect: route explain reads the new deadline.
            let explained = try await RouteExplainAPITests.explain(client, card: "card_bridge_demo").json
            #expect(explained["deadline_ms"] as? Int == 12_000)
            #expect(try await GatewayHarness.provision(client, card: "card_bridge_demo", body: try GatewayHarness.requestBody()).status == .ok)
        }
    }

    /// A longer deadline applies at once, but the graceful shutdown's bound, which by default
    /// follows the longest deadline, was fixed at start-up: the answer says it needs a restart.
    @Test func aLongerDeadlineSaysTheShutdownBoundNeedsARestart() async throws {
        let file = try ReloadableFile()
        defer { file.remove() }
        try await GatewayHarness.run(config: try file.config(), configSource: file.source) { client, _ in
            try file.write(Self.replacing("  deadline_ms: 15000", "  deadline_ms: 18000"))
            let answer = try await Self.reload(client)
            #expect(answer.status == .ok, "\(String(buffer: answer.body))")
            #expect(answer.json["changed"] as? [String] == ["server.deadline_ms"])
            #expect(answer.json["restart_required"] as? [String] == ["server.shutdown_timeout_ms"])
            // A later reload still runs under the start-up bound: said again.
            try file.write(Self.replacing("  deadline_ms: 15000", "  deadline_ms: 17000"))
            let later = try await Self.reload(client)
            #expect(later.json["restart_required"] as? [String] == ["server.shutdown_timeout_ms"], "\(String(buffer: later.body))")
        }
    }

    /// The store keeps running with the settings it started with, so a reload is checked with
    /// them: deadlines that outgrow the running Idempotency-Key lifetime are refused (a key could
    /// expire while its request still runs, and a duplicate would reach the issuer again), even when
    /// the file raises the lifetime too.
    @Test func aReloadsDeadlinesMustFitTheRunningIdempotencyLifetime() async throws {
        let shortTTL = Self.replacing("vault:\n  key: sandbox", "vault:\n  key: sandbox\nstore:\n  idempotency_ttl_seconds: 60")
        let file = try ReloadableFile(shortTTL)
        defer { file.remove() }
        try await GatewayHarness.run(config: try file.config(), configSource: file.source) { client, _ in
            try file.write { text in
                try Self.replacing("  deadline_ms: 15000", "  deadline_ms: 60000")(
                    try Self.replacing("vault:\n  key: sandbox", "vault:\n  key: sandbox\nstore:\n  idempotency_ttl_seconds: 86400")(text))
            }
            let refused = try await Self.reload(client)
            #expect(refused.status == .unprocessableContent, "\(String(buffer: refused.body))")
            #expect(refused.json["code"] as? String == "config_invalid")
            let detail = try #require(refused.json["detail"] as? String)
            #expect(detail.contains("store.idempotency_ttl_seconds") && detail.contains("the running value, 60"), "\(detail)")
            #expect(try await RouteExplainAPITests.explain(client, card: "card_bridge_demo").json["deadline_ms"] as? Int == 15_000)
            // A deadline that fits the running lifetime (20 s + 30 s < 60 s) is applied.
            try file.write { text in try Self.replacing("  deadline_ms: 15000", "  deadline_ms: 20000")(try shortTTL(text)) }
            let applied = try await Self.reload(client)
            #expect(applied.status == .ok, "\(String(buffer: applied.body))")
            #expect(try await RouteExplainAPITests.explain(client, card: "card_bridge_demo").json["deadline_ms"] as? Int == 20_000)
        }
    }

    static let twoBridgeEndpoints: @Sendable (String) throws -> String = { text in
        try Self.replacing("      - url: sandbox://bridge          # production: https://api.bridge.xyz/v0",
                           "      - url: sandbox://bridge/primary\n      - url: sandbox://bridge")(
            try Self.replacing("circuit_breaker: { failure_threshold: 5, open_ms: 30000", "circuit_breaker: { failure_threshold: 2, open_ms: 30000")(text))
    }

    @Test func unchangedEndpointsKeepTheirBreakersAndChangedOnesStartClosed() async throws {
        let file = try ReloadableFile(Self.twoBridgeEndpoints)
        defer { file.remove() }
        try await GatewayHarness.run(config: try file.config(), configSource: file.source) { client, _ in
            try await ResilienceTests.addFault(client, #"{"issuer":"bridge","endpoint":0,"mode":"unavailable","count":100}"#)
            #expect(try await GatewayHarness.provision(client, card: "card_bridge_demo", body: try GatewayHarness.requestBody()).status == .ok)
            let breakers = { () async throws -> [String?] in
                let endpoints = try await RouteExplainAPITests.explain(client, card: "card_bridge_demo").json["endpoints"] as? [[String: Any]]
                return endpoints?.map { $0["breaker"] as? String } ?? []
            }
            #expect(try await breakers() == ["open", "closed"])

            // Another issuer changes: Bridge's breakers are as they were.
            try file.write { try Self.twoBridgeEndpoints(try Self.replacing("      token: sandbox", "      token: sandbox\n    timeouts: { request_ms: 4000 }")($0)) }
            let first = try await Self.reload(client)
            #expect(first.status == .ok, "\(String(buffer: first.body))")
            #expect(first.json["changed"] as? [String] == ["issuers.tmp"])
            #expect(try await breakers() == ["open", "closed"])

            // Bridge's breaker policy changes: its endpoints start closed under the new policy.
            try file.write { try Self.replacing("open_ms: 30000", "open_ms: 20000")(try Self.twoBridgeEndpoints($0)) }
            let second = try await Self.reload(client)
            #expect(second.json["changed"] as? [String] == ["issuers.bridge", "issuers.tmp"])
            #expect(try await breakers() == ["closed", "closed"])
        }
    }

    @Test func anAdminsPauseOutlivesAReloadUntilTheFileChangesIt() async throws {
        let file = try ReloadableFile()
        defer { file.remove() }
        try await GatewayHarness.run(config: try file.config(), configSource: file.source) { client, _ in
            #expect(try await CardRegistryAPITests.send(client, .post, "/v1/admin/issuers/bridge/pause", key: GatewayHarness.opsKey).status == .ok)
            try file.write(Self.addNewClient)
            #expect(try await Self.reload(client).status == .ok)
            #expect(try await RouteExplainAPITests.explain(client, card: "card_bridge_demo").json["paused"] as? Bool == true)
            let refused = try await GatewayHarness.provision(client, card: "card_bridge_demo", body: try GatewayHarness.requestBody())
            #expect(refused.json["code"] as? String == "upstream_unavailable")

            // The file pausing TMP takes effect; Bridge's line did not change, so the admin's pause stays.
            try file.write(Self.replacing("  tmp:\n    kind: tmp\n", "  tmp:\n    kind: tmp\n    paused: true\n"))
            #expect(try await Self.reload(client).status == .ok)
            let tmp = try await RouteExplainAPITests.explain(client, card: "card_tmp_demo").json
            #expect(tmp["paused"] as? Bool == true)
            #expect(tmp["paused_by"] as? String == "config")
            #expect(try await RouteExplainAPITests.explain(client, card: "card_bridge_demo").json["paused_by"] as? String == "ops")
        }
    }

    @Test func aRequestInFlightFinishesOnTheConfigurationItStartedWith() async throws {
        let file = try ReloadableFile()
        defer { file.remove() }
        try await GatewayHarness.run(config: try file.config(), configSource: file.source) { client, sandbox in
            let port = client.port
            let body = try GatewayHarness.requestBody()
            // Bridge holds its next answer until the reload is done; the request is sent on a
            // connection of its own.
            let gate = FaultGate()
            await sandbox.faults(issuer: "bridge")?.add(Fault(mode: .slow, count: 1, gate: gate))
            async let slow = GatewayClient.with(port: port) { other in
                try await GatewayHarness.provision(other, card: "card_bridge_demo", body: body)
            }
            // The simulator has taken the request once its fault is used up (it logs only after answering).
            var taken = false
            for _ in 0..<500 where !taken {
                let pending = try await CardRegistryAPITests.send(client, .get, "/v1/sandbox/faults", key: GatewayHarness.opsKey).json["faults"] as? [Any]
                taken = pending?.isEmpty == true
                if !taken { try await Task.sleep(for: .milliseconds(5)) }
            }
            try #require(taken, "the slow request never reached the Bridge simulator")

            // While it is in flight, Bridge moves to an address where nothing listens, with other
            // timeouts (so it gets a new HTTP client and the one in use is retired).
            try file.write { text in
                try Self.replacing("      - url: sandbox://bridge          # production: https://api.bridge.xyz/v0",
                                   "      - url: http://127.0.0.1:1/v0")(
                    try Self.replacing("timeouts: { connect_ms: 2000, request_ms: 5000 }", "timeouts: { connect_ms: 2000, request_ms: 4000 }")(text))
            }
            let reloaded = try await Self.reload(client)
            #expect(reloaded.status == .ok, "\(String(buffer: reloaded.body))")

            // The request in flight is answered by the simulator, over the client it started with...
            gate.open()
            let answer = try await slow
            #expect(answer.status == .ok, "\(String(buffer: answer.body))")
            #expect(answer.json["issuer"] as? String == "bridge")
            // ...and a new request goes to the new address.
            let after = try await GatewayHarness.provision(client, card: "card_bridge_demo", body: body)
            #expect(after.json["code"] as? String == "upstream_unavailable", "\(String(buffer: after.body))")
            #expect(await sandbox.bridge.log.count == 1)
        }
    }

    /// A request is authenticated when its headers arrive, and acts once its body is in: a client
    /// holding its body back while ops revokes its key, or moves its program away, must not act as
    /// before when the body comes (the reload audit's slow body provisioned 8.5 s after).
    @Test(arguments: revokedOrMoved)
    func aReloadWhileABodyIsOnItsWayDecidesWhoTheRequestIs(old: String, new: String, status: Int, code: String) async throws {
        let file = try ReloadableFile()
        defer { file.remove() }
        try await GatewayHarness.run(config: try file.config(), configSource: file.source) { client, sandbox in
            let body = Array(try GatewayHarness.requestBody())
            let connection = try await RawConnection.open(port: client.port)
            defer { connection.close() }
            try await connection.send("POST /v1/cards/card_bridge_demo/wallet-provisioning/apple-pay HTTP/1.1\r\nHost: x\r\n"
                + "Authorization: Bearer \(GatewayHarness.demoKey)\r\nContent-Type: application/json\r\nContent-Length: \(body.count)\r\n\r\n")
            try await connection.send(bytes: Array(body.prefix(10)))
            // Counted in flight (with the scrape that reads it): authenticated on the first file.
            #expect(await RawConnection.eventually { ((try? await Self.metric(client, "gateway_requests_in_flight")) ?? 0) >= 2 })

            try file.write(Self.revokingOrMoving(old, new))
            let reloaded = try await Self.reload(client)
            #expect(reloaded.status == .ok && reloaded.json["changed"] as? [String] == ["clients"], "\(String(buffer: reloaded.body))")

            try await connection.send(bytes: Array(body.dropFirst(10)))
            #expect(await connection.eventually { $0.text.contains("\r\n\r\n{") && $0.text.hasSuffix("}") }, "\(connection.text)")
            let (statusLine, _, answer) = try HTTPEdgeHandlerTests.parse(connection.text)
            #expect(statusLine.hasPrefix("HTTP/1.1 \(status) "), "\(connection.text)")
            let problem = try #require(try JSONSerialization.jsonObject(with: Data(answer.utf8)) as? [String: Any])
            #expect(problem["code"] as? String == code, "\(problem)")
            #expect(await sandbox.bridge.log.count == 0, "the issuer was called")
        }
    }

    /// A reload that revokes the key, or moves the program to another client, while a request
    /// waits (for its retry, or as a duplicate for its Idempotency-Key's claim) stops it: the
    /// retry is not sent, and the duplicate, which takes the key once the first has let it go,
    /// sends nothing either (the reload audit: the duplicate provisioned 2 s after the reload,
    /// with the old rights, and a retry went out 0.9 s after a move). The caller is asked again
    /// when an operation starts and before each retry.
    @Test(arguments: revokedOrMoved)
    func aReloadWhileARequestOrItsDuplicateWaitsStopsBoth(old: String, new: String, status: Int, code: String) async throws {
        // Bridge throttles the first attempt: the request waits 2 s (its Retry-After) before it
        // tries again, holding its Idempotency-Key's claim; a 429 says the issuer did nothing,
        // so the key is let go when the request ends.
        let (first, duplicate, bridge) = try await Self.duplicateAcrossAReload(
            fault: #"{"issuer":"bridge","mode":"throttled","retry_after_seconds":2,"count":1}"#, firstWaits: .seconds(2),
            key: "reload-while-waiting-1", edit: Self.revokingOrMoving(old, new))
        for answer in [first, duplicate] {
            #expect(answer.status.code == status && answer.json["code"] as? String == code, "\(String(buffer: answer.body))")
        }
        // Bridge saw the throttled attempt only.
        #expect(bridge == [429])
    }

    /// The fallback to the local issuer, after the routed issuer took its time, asks the caller
    /// again first: a key revoked, or the program moved, meanwhile gets nothing from the vault
    /// (the review: the fallback had provisioned with the rights the request arrived with).
    @Test(arguments: revokedOrMoved)
    func aReloadWhileTheRoutedIssuerTakesItsTimeStopsTheFallback(old: String, new: String, status: Int, code: String) async throws {
        let fallback = Self.replacing("  rules: []\n", "  rules:\n    - { match: { program: demo }, issuer: bridge, fallback: local }\n")
        let oneTry = Self.replacing("timeouts: { connect_ms: 2000, request_ms: 5000 }   # per try; three tries fit the 15 s deadline\n    # The defaults, written out (README, \"Resilience\", says why):\n    connections: { max_per_host: 8, idle_timeout_ms: 30000 }\n    retry: { max_attempts: 3,",
                                    "timeouts: { connect_ms: 2000, request_ms: 14000 }   # per try; three tries fit the 15 s deadline\n    # The defaults, written out (README, \"Resilience\", says why):\n    connections: { max_per_host: 8, idle_timeout_ms: 30000 }\n    retry: { max_attempts: 1,")
        let file = try ReloadableFile { try oneTry(try fallback($0)) }
        defer { file.remove() }
        try await GatewayHarness.run(config: try file.config(), configSource: file.source) { client, sandbox in
            // Bridge holds the request until the reload is done, then answers 503: its one try
            // (14 s at most) failed, and the route falls back. (It had been held past a 3 s
            // per-try timeout, a window of real time the reload had to fit in.)
            let gate = FaultGate()
            await sandbox.faults(issuer: "bridge")?.add(Fault(mode: .unavailable, count: 1, gate: gate))
            let body = try GatewayHarness.requestBody()
            let port = client.port
            async let answer = GatewayClient.with(port: port) { own in try await GatewayHarness.provision(own, card: "card_bridge_demo", body: body) }
            try await Self.waitUntilTheFaultIsTaken(client)
            try file.write { try Self.revokingOrMoving(old, new)(try oneTry(try fallback($0))) }
            #expect(try await Self.reload(client).status == .ok)
            gate.open()
            let response = try await answer
            #expect(response.status.code == status && response.json["code"] as? String == code, "\(String(buffer: response.body))")
            #expect(try await Self.metric(client, #"gateway_fallbacks_total{issuer="bridge",fallback="local"}"#) == 1, "the route did fall back")
        }
    }

    /// A duplicate that waited for the first request's claim and is then answered from the stored
    /// answer is asked again too: a key revoked, or the program moved, while it waited gets no
    /// replay of the first's pass data (the review).
    @Test(arguments: revokedOrMoved)
    func aReloadWhileADuplicateWaitsStopsItsReplay(old: String, new: String, status: Int, code: String) async throws {
        let (first, replay, _) = try await Self.duplicateAcrossAReload(
            fault: nil, key: "replay-after-reload-1", edit: Self.revokingOrMoving(old, new))
        // The first had its issuer's answer coming: it is answered as it ran.
        #expect(first.status == .ok)
        #expect(replay.status.code == status && replay.json["code"] as? String == code, "\(String(buffer: replay.body))")
        #expect(replay.json["encrypted_pass_data"] == nil)
    }

    /// A duplicate that waited for the first request's claim and then runs itself (the first
    /// ended knowing the issuer did nothing: Bridge refused it, the claim was let go) is refused as
    /// the configuration says now, a key revoked meanwhile: 401, nothing sent, and on the trail
    /// under the provisioning its problem names (the durability audit: it had left no event).
    @Test func aDuplicateThatRunsAfterAReloadRevokedItsKeyIsRefusedOnTheTrail() async throws {
        let store = LostAcknowledgementStore(try await GatewayHarness.temporaryStore())
        let (first, duplicate, bridge) = try await Self.duplicateAcrossAReload(
            fault: nil, gatedMode: .rejected, key: "run-after-reload-1", edit: Self.revokingOrMoving(Self.revokedOrMoved[0].old,
                                                                                                    Self.revokedOrMoved[0].new),
            store: store)
        #expect(first.status.code == 422 || first.status.code == 502, "\(String(buffer: first.body))")
        #expect(duplicate.status.code == 401 && duplicate.json["code"] as? String == "unauthorized", "\(String(buffer: duplicate.body))")
        #expect(bridge == [400], "the duplicate reached Bridge: \(bridge)")
        let id = try #require(duplicate.json["provisioning_id"] as? String, "\(String(buffer: duplicate.body))")
        let trail = try await store.auditEvents(ProvisioningID(id))
        #expect(trail.count == 1 && trail.first?.errorCode == .unauthorized && trail.first?.attempt == 0 && trail.first?.issuer == nil,
                "\(trail)")
        #expect(trail.first?.client == "demo" && trail.first?.cardID == "card_bridge_demo" && trail.first?.operation == .applePay)
    }

    /// An activation without a card, waiting to try again after TMP's 429, asks again whether
    /// its client may make one: a reload that revoked the key, or took `activations_without_card`
    /// away, meanwhile sends no retry (the review: the check before a retry needed a card).
    @Test(arguments: [
        (revokedOrMoved[0].old, revokedOrMoved[0].new, 401, "unauthorized"),
        ("    activations_without_card: true\n", "", 403, "forbidden"),
    ])
    func aReloadWhileAnActivationWithoutACardWaitsStopsItsRetry(old: String, new: String, status: Int, code: String) async throws {
        let file = try ReloadableFile()
        defer { file.remove() }
        // The Retry-After is waited on this clock, moved only once the reload is done.
        let clock = TestClock()
        try await GatewayHarness.run(config: try file.config(), configSource: file.source, clock: clock) { client, sandbox in
            try await ResilienceTests.addFault(client, #"{"issuer":"tmp","mode":"throttled","retry_after_seconds":2,"count":1}"#)
            let port = client.port
            async let answer = GatewayClient.with(port: port) { own in
                try await CardRegistryAPITests.send(own, .post, "/v1/token-activations", json: #"{"token_unique_reference":"DWSPMC0000000003"}"#)
            }
            try await Self.waitUntilTheFaultIsTaken(client)
            try file.write(Self.replacing(old, new))
            #expect(try await Self.reload(client).status == .ok)
            try #require(await clock.advanceToNextSleeper(upTo: .seconds(120)) == .seconds(2), "the retry waits TMP's Retry-After")
            let response = try await answer
            #expect(response.status.code == status && response.json["code"] as? String == code, "\(String(buffer: response.body))")
            // TMP saw the throttled attempt only.
            #expect(await sandbox.tmp.log.requests.map(\.status) == [429])
        }
    }

    /// A client whose program a reload took away reads the trails of that program's cards no
    /// more (its events name the program), and reads them again once it holds it again.
    @Test func aTrailIsReadOnlyWhileTheClientHoldsItsProgram() async throws {
        let file = try ReloadableFile()
        defer { file.remove() }
        try await GatewayHarness.run(config: try file.config(), configSource: file.source) { client, _ in
            let own = try await GatewayHarness.provision(client, card: "card_bridge_demo", body: try GatewayHarness.requestBody())
            let provisioning = try #require(own.json["provisioning_id"] as? String)
            let read = { try await CardRegistryAPITests.send(client, .get, "/v1/provisionings/\(provisioning)", key: GatewayHarness.demoKey) }
            #expect(try await read().status == .ok)
            try file.write(Self.revokingOrMoving(Self.revokedOrMoved[1].old, Self.revokedOrMoved[1].new))
            #expect(try await Self.reload(client).status == .ok)
            let refused = try await read()
            #expect(refused.status == .notFound && refused.json["code"] as? String == "not_found", "\(refused.json)")
            #expect(!String(buffer: refused.body).contains("card_bridge_demo"))
            try file.write { $0 }
            #expect(try await Self.reload(client).status == .ok)
            #expect(try await read().status == .ok)
        }
    }

    /// A reload runs the file with the running values of the settings that take a restart, so it
    /// is checked again as that whole: a rule falling back to the local issuer, in a file that
    /// enables it, is refused while the running process has none (the reload audit saw it applied,
    /// and the fallback then never ran). A store the next start-up could not open (a PostgreSQL URL
    /// from an unset variable) is refused too, though the running store is kept.
    @Test func aReloadIsCheckedAsItWouldRunAndAsTheNextStartUpWouldRead() async throws {
        let file = try ReloadableFile()
        defer { file.remove() }
        var running = try file.config()
        running.local.enabled = false
        running.sandbox.cards.removeAll { $0.issuer == "local" }
        try await GatewayHarness.run(config: running, configSource: file.source) { client, _ in
            try file.write(Self.replacing("  rules: []\n", """
                  rules:
                    - match: { program: demo }
                      issuer: bridge
                      fallback: local

                """))
            let refused = try await Self.reload(client)
            #expect(refused.status == .unprocessableContent && refused.json["code"] as? String == "config_invalid", "\(refused.json)")
            let detail = try #require(refused.json["detail"] as? String)
            #expect(detail.contains("routing.rules[0].fallback") && detail.contains("needs local.enabled: true")
                    && detail.contains("running values"), "\(detail)")

            try file.write(Self.replacing("vault:\n", "store:\n  postgres:\n    url: env:GATEWAY_TEST_PG_URL_NOT_SET\nvault:\n"))
            let store = try await Self.reload(client)
            #expect(store.status == .unprocessableContent, "\(store.json)")
            #expect((store.json["detail"] as? String)?.contains("GATEWAY_TEST_PG_URL_NOT_SET") == true, "\(store.json)")
            #expect(try await Self.metric(client, "gateway_config_generation") == 1)
        }
    }

    @Test func reloadsUnderConcurrentRequestsFailNone() async throws {
        let file = try ReloadableFile()
        defer { file.remove() }
        try await GatewayHarness.run(config: try file.config(), configSource: file.source) { client, _ in
            let port = client.port
            let body = try GatewayHarness.requestBody()
            let statuses = try await withThrowingTaskGroup(of: [HTTPResponse.Status].self) { group in
                // Four connections, each sending provisionings one after another...
                for _ in 0..<4 {
                    group.addTask {
                        try await GatewayClient.with(port: port) { own in
                            var seen: [HTTPResponse.Status] = []
                            for card in Array(repeating: ["card_bridge_demo", "card_tmp_demo", "card_crossmint_demo"], count: 5).joined() {
                                seen.append(try await GatewayHarness.provision(own, card: card, body: body).status)
                            }
                            return seen
                        }
                    }
                }
                // ...while the file alternates between two valid versions and is reloaded each time.
                group.addTask {
                    try await GatewayClient.with(port: port) { admin in
                        var seen: [HTTPResponse.Status] = []
                        for round in 0..<12 {
                            try file.write(round.isMultiple(of: 2) ? Self.addNewClient : Self.replacing("  deadline_ms: 15000", "  deadline_ms: 14000"))
                            seen.append(try await Self.reload(admin).status)
                        }
                        return seen
                    }
                }
                return try await group.reduce(into: []) { $0 += $1 }
            }
            #expect(statuses.count == 4 * 15 + 12)
            #expect(statuses.allSatisfy { $0 == .ok }, "\(statuses.filter { $0 != .ok })")
            #expect(try await Self.metric(client, "gateway_config_generation") == 13)
        }
    }
}
