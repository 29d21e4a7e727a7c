import AsyncHTTPClient
import Foundation
import GatewayTestSupport
import GRDB
import NIOCore
import NIOHTTP1
import NIOFoundationCompat
import NIOPosix
import Testing

/// SIGTERM to the real executable: `/readyz` answers 503 at once, requests are still served for
/// `server.shutdown_delay_ms`, the request in flight finishes with its 200, and the exit code is 0.
@Suite struct GracefulShutdownTests {
    static func send(_ method: HTTPMethod, _ url: String, body: Data? = nil) async throws -> (status: Int, json: [String: Any]) {
        var request = HTTPClientRequest(url: url)
        request.method = method
        request.headers.add(name: "Authorization", value: "Bearer sk_sandbox_demo")
        if let body {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(data: body))
        }
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(30))
        let bytes = try await response.body.collect(upTo: 1 << 20)
        return (Int(response.status.code), (try? JSONSerialization.jsonObject(with: Data(buffer: bytes))) as? [String: Any] ?? [:])
    }

    /// The sandbox config with its store in a fresh directory (removed at the process's exit with
    /// every test directory), and the sandbox device's Apple Pay request.
    static func sandbox(_ name: String, serverLines: [String] = [], store: String? = nil) throws -> (directory: URL, config: URL, body: Data) {
        let directory = TestDirectories.root.appendingPathComponent("\(name)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let config = try ListenerCommandLineTests.sandboxConfig(directory: directory, serverLines: serverLines, store: store)
        let body = try Data(contentsOf: CommandLineTests.packageRoot.appendingPathComponent("Config/sandbox/apple-pay-request.json"))
        return (directory, config, body)
    }

    /// Whether the simulator has taken the request its queued fault was for (the queue is empty once
    /// the fault is used up), asked for up to 5 s.
    static func faultTaken(_ base: String) async throws -> Bool {
        for _ in 0..<500 {
            if (try await send(.GET, "\(base)/v1/sandbox/faults").json["faults"] as? [Any])?.isEmpty == true { return true }
            try await Task.sleep(for: .milliseconds(10))
        }
        return false
    }

    /// Queues Bridge's next answer `delayMS` late, sends the sandbox device's Apple Pay request into
    /// it, and returns once Bridge has taken it (the request's status, or nil, when it ends).
    static func slowProvisioning(_ base: String, delayMS: Int, body: Data) async throws -> Task<Int?, Never> {
        #expect(try await send(.POST, "\(base)/v1/sandbox/faults",
                               body: Data(#"{"issuer":"bridge","mode":"slow","delay_ms":\#(delayMS)}"#.utf8)).status == 200)
        let slow = Task { (try? await send(.POST, "\(base)/v1/cards/card_bridge_demo/wallet-provisioning/apple-pay", body: body))?.status }
        let taken = try await faultTaken(base)
        try #require(taken, "the slow request never reached the Bridge simulator")
        return slow
    }

    @Test func sigtermDrainsFinishesTheRequestInFlightAndExitsZero() async throws {
        let (_, config, body) = try Self.sandbox("drain", serverLines: ["shutdown_delay_ms: 5000"])

        let (seen, status) = try await Command.withRunning(
            try CommandLineTests.executable().path, ["--config", config.path, "--port", "0"], workingDirectory: CommandLineTests.packageRoot.path
        ) { running in
            let base = try #require(running.firstLine.split(separator: " ").first { $0.hasPrefix("http://") }.map(String.init))
            #expect(try await Self.send(.GET, "\(base)/readyz").status == 200)
            // Bridge's next answer takes 8 s: the request sent now is in flight when SIGTERM comes,
            // and still when the listener closes, 5 s later. (The delay had been 1.5 s, and the
            // answer 3 s: on a stalled machine the readiness polls and the /healthz after them
            // could outlast the delay and meet a closed listener.)
            let fault = try await Self.send(.POST, "\(base)/v1/sandbox/faults", body: Data(#"{"issuer":"bridge","mode":"slow","delay_ms":8000}"#.utf8))
            #expect(fault.status == 200)
            async let slow = Self.send(.POST, "\(base)/v1/cards/card_bridge_demo/wallet-provisioning/apple-pay", body: body)
            // The simulator has taken the request once its fault is used up.
            let taken = try await Self.faultTaken(base)
            // Otherwise the request might arrive after SIGTERM and prove nothing about one in flight.
            try #require(taken, "the slow request never reached the Bridge simulator before SIGTERM")
            running.signal(SIGTERM)
            // 503 at once (polled for up to 4 s, inside the delay: the signal is delivered and
            // handled asynchronously, and returns as soon as it is)...
            var readiness = (status: 0, json: [String: Any]())
            for _ in 0..<400 {
                readiness = try await Self.send(.GET, "\(base)/readyz")
                if readiness.status == 503 { break }
                try await Task.sleep(for: .milliseconds(10))
            }
            // ...while other requests are still served during the delay...
            let health = try await Self.send(.GET, "\(base)/healthz").status
            // ...and the request in flight finishes with its answer.
            let answer = try await slow
            return (readiness: readiness.status, code: readiness.json["code"] as? String, health: health,
                    answer: answer.status, issuer: answer.json["issuer"] as? String)
        }
        #expect(seen.readiness == 503)
        #expect(seen.code == "shutting_down")
        #expect(seen.health == 200)
        #expect(seen.answer == 200)
        #expect(seen.issuer == "bridge")
        #expect(status == 0)
    }

    /// Requests cut off at the shutdown timeout still write what they did, and each write may wait
    /// the store's busy timeout while another writer holds it (here the test, for 7 s). The process
    /// exits 0 once they are done: a 5 s bound on the cancellation had ended it with
    /// ServiceLifecycle's fatalError (exit 132) while they waited (lifecycle audit).
    @Test func aShutdownWhoseWritesWaitOnABusyStoreStillExitsZero() async throws {
        let (directory, config, body) = try Self.sandbox("busy", serverLines: ["shutdown_timeout_ms: 1000"])
        let database = directory.appendingPathComponent("gateway.sqlite").path
        let log = directory.appendingPathComponent("gateway.log").path

        let (_, status) = try await Command.withRunning(
            try CommandLineTests.executable().path, ["--config", config.path, "--port", "0"], workingDirectory: CommandLineTests.packageRoot.path,
            limit: .seconds(120), stopLimit: .seconds(60), errorLog: log
        ) { running in
            let base = try #require(running.firstLine.split(separator: " ").first { $0.hasPrefix("http://") }.map(String.init))
            let slow = try await Self.slowProvisioning(base, delayMS: 4000, body: body)
            // Another writer takes the store's lock for 7 s, from before the shutdown, on a thread
            // of its own: held on one of the concurrency pool's two threads, it had slowed every
            // other test of the run (a real 1 s timeout elsewhere then failed).
            let locked = Task {
                try await withCheckedThrowingContinuation { (done: CheckedContinuation<Void, any Error>) in
                    Thread.detachNewThread {
                        done.resume(with: Result {
                            let other = try TestSQLite.queue(database)
                            try other.writeWithoutTransaction { db in
                                try db.execute(sql: "BEGIN IMMEDIATE")
                                Thread.sleep(forTimeInterval: 7)
                                try db.execute(sql: "COMMIT")
                            }
                        })
                    }
                }
            }
            try await Task.sleep(for: .milliseconds(200))
            running.signal(SIGTERM)
            try await locked.value
            _ = await slow.value
        }
        #expect(status == 0, "the gateway did not exit 0 (a negative status is the signal that ended it); its log ends:\n\(Command.tail(ofLog: log))")
        // What the cut-off request did is on record: its attempt at Bridge, written past the
        // busy store before the process ended.
        let attempts = try await TestSQLite.queue(database).read { db in
            try Int.fetchOne(db, sql: "SELECT count(*) FROM audit_events WHERE card_id = 'card_bridge_demo' AND issuer = 'bridge' AND attempt = 1")
        }
        #expect(attempts == 1, "the cut-off request's attempt is not on record; the gateway's log ends:\n\(Command.tail(ofLog: log))")
    }

    /// The same on PostgreSQL, whose store has a connection pool that runs as a service: at the
    /// shutdown timeout the group cancelled it with everything else, its connections closed under
    /// the cut-off request's writes, and the attempt at Bridge (whose answer had not come) was on
    /// no record (the send-twice audit). The pool now stops only once the server has returned.
    @Test(.enabled(if: PostgresTestServer.isAvailable, Comment(rawValue: PostgresTestServer.skipMessage)))
    func aShutdownPastItsTimeoutStillWritesToPostgreSQL() async throws {
        try await PostgresTestServer.with { server in
            let (_, config, body) = try Self.sandbox("postgres-cut", serverLines: ["shutdown_timeout_ms: 1000"],
                                                     store: "\nstore:\n  postgres:\n    url: \(server.url)\n")
            let log = TestDirectories.root.appendingPathComponent("postgres-cut-\(UUID().uuidString).log").path
            let (_, status) = try await Command.withRunning(
                try CommandLineTests.executable().path, ["--config", config.path, "--port", "0"], workingDirectory: CommandLineTests.packageRoot.path,
                limit: .seconds(120), stopLimit: .seconds(60), errorLog: log
            ) { running in
                let base = try #require(running.firstLine.split(separator: " ").first { $0.hasPrefix("http://") }.map(String.init))
                // Bridge's answer takes 6 s, past the shutdown's 1 s timeout.
                let slow = try await Self.slowProvisioning(base, delayMS: 6000, body: body)
                running.signal(SIGTERM)
                let answer = await slow.value
                #expect(answer != 200, "the request was not cut off: the test proves nothing")
            }
            #expect(status == 0, "the gateway did not exit 0 (a negative status is the signal that ended it); its log ends:\n\(Command.tail(ofLog: log))")
            let attempts = try await server.query(
                "SELECT count(*) FROM audit_events WHERE card_id = 'card_bridge_demo' AND issuer = 'bridge' AND attempt = 1")
            #expect(attempts == "1", "the cut-off request's attempt is not on record; the gateway's log ends:\n\(Command.tail(ofLog: log))")
        }
    }

    /// A SIGHUP once the shutdown has begun reloads nothing (the reload service hears of the
    /// shutdown last, after the upstream clients and the store): no `config_reloaded` event, while
    /// one before the SIGTERM is applied as usual.
    @Test func aSIGHUPDuringTheShutdownReloadsNothing() async throws {
        let (directory, config, body) = try Self.sandbox("hup")
        let database = directory.appendingPathComponent("gateway.sqlite").path
        @Sendable func reloads() async throws -> Int {
            try await TestSQLite.queue(database).read { db in
                try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM security_events WHERE kind = 'config_reloaded'") ?? -1
            }
        }
        let (_, status) = try await Command.withRunning(
            try CommandLineTests.executable().path, ["--config", config.path, "--port", "0"], workingDirectory: CommandLineTests.packageRoot.path
        ) { running in
            let base = try #require(running.firstLine.split(separator: " ").first { $0.hasPrefix("http://") }.map(String.init))
            running.signal(SIGHUP)
            var applied = false
            // Up to 10 s (it returns once applied): a reload on a stalled machine can take seconds.
            for _ in 0..<1000 where !applied {
                applied = (try? await reloads()) == 1
                if !applied { try await Task.sleep(for: .milliseconds(10)) }
            }
            #expect(applied, "a SIGHUP before the shutdown was not applied")
            #expect(try await Self.send(.POST, "\(base)/v1/sandbox/faults",
                                        body: Data(#"{"issuer":"bridge","mode":"slow","delay_ms":2500}"#.utf8)).status == 200)
            let slow = Task { (try? await Self.send(.POST, "\(base)/v1/cards/card_bridge_demo/wallet-provisioning/apple-pay", body: body))?.status }
            try #require(try await Self.faultTaken(base), "the slow request never reached the Bridge simulator")
            running.signal(SIGTERM)
            try await Task.sleep(for: .milliseconds(300))
            for _ in 0..<3 {
                running.signal(SIGHUP)
                try await Task.sleep(for: .milliseconds(100))
            }
            #expect(await slow.value == 200)
        }
        #expect(status == 0)
        #expect(try await reloads() == 1, "a SIGHUP during the shutdown reloaded the configuration")
    }
}
