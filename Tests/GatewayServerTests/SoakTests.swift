import Foundation
import Gateway
import GatewayServer
import Hummingbird
import HummingbirdTesting
import NIOCore
import ProvisioningCore
import Synchronization
import Testing

/// A bounded soak: a few hundred provisionings against Bridge and TMP while random faults are
/// queued at their simulators. Every request must end within its deadline with a payload or a
/// retryable problem, every answer must be in the audit trail, and memory must level off.
struct SoakTests {
    static let requests = 240
    static let workers = 12

    /// Resident set size in bytes, from /proc (Linux).
    static func residentBytes() -> Int {
        guard let statm = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8),
              let pages = Int(statm.split(separator: " ")[1]) else { return 0 }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }

    static let faults = [
        #""mode":"unavailable","count":2"#, #""mode":"throttled","count":1,"retry_after_seconds":0"#,
        #""mode":"timeout","count":1,"delay_ms":4000"#, #""mode":"reset","count":1"#, #""mode":"slow","count":2,"delay_ms":50"#,
    ]

    struct Outcome: Sendable {
        let card: String
        let status: Int
        let code: String?
        let retryable: Bool?
        let provisioningID: String?
        let elapsed: Duration
    }

    @Test func aBoundedSoakUnderRandomFaults() async throws {
        // The soak is one client sending as fast as 12 workers can, then reading back 240 audit
        // trails in a row: far over the product default (50/s, burst 100), which would turn the
        // read-back into 429s. The soak is about faults upstream, so its client is not throttled.
        let config = try GatewayHarness.withDemoRateLimit(RateLimitConfig(requestsPerSecond: 100_000, burst: 100_000),
                                                          ResilienceTests.config())
        try await GatewayHarness.run(config: config) { client, _ in
            let body = try GatewayHarness.requestBody()
            let outcomes = Locked<[Outcome]>([])
            let next = Locked(0)
            let cards = ["card_bridge_demo", "card_tmp_demo"]
            var rssAfterWarmUp = 0

            func round(_ count: Int) async {
                await withTaskGroup(of: Void.self) { group in
                    for worker in 0..<Self.workers {
                        group.addTask {
                            var generator = SystemRandomNumberGenerator()
                            while true {
                                let index = next.withLock { value -> Int? in
                                    guard value < count else { return nil }
                                    value += 1
                                    return value
                                }
                                guard let index else { return }
                                if index % 4 == 0 {
                                    let issuer = ["bridge", "tmp"].randomElement(using: &generator)!
                                    let fault = Self.faults.randomElement(using: &generator)!
                                    _ = try? await CardRegistryAPITests.send(client, .post, "/v1/sandbox/faults", json: #"{"issuer":"\#(issuer)",\#(fault)}"#)
                                }
                                let card = cards[(index + worker) % 2]
                                let started = ContinuousClock.now
                                guard let response = try? await GatewayHarness.provision(client, card: card, body: body) else {
                                    outcomes.withLock { $0.append(Outcome(card: card, status: 0, code: nil, retryable: nil, provisioningID: nil,
                                                                          elapsed: started.duration(to: .now))) }
                                    continue
                                }
                                let json = response.json
                                outcomes.withLock {
                                    $0.append(Outcome(card: card, status: Int(response.status.code), code: json["code"] as? String,
                                                      retryable: json["retryable"] as? Bool, provisioningID: json["provisioning_id"] as? String,
                                                      elapsed: started.duration(to: .now)))
                                }
                            }
                        }
                    }
                }
            }

            await round(60)
            rssAfterWarmUp = Self.residentBytes()
            await round(Self.requests)
            let rssAfter = Self.residentBytes()

            let all = outcomes.withLock { $0 }
            #expect(all.count == Self.requests)
            // The margin is for a loaded machine's scheduling.
            let deadline = Duration.milliseconds(ResilienceTests.deadlineMS + 1_000)
            for outcome in all {
                #expect(outcome.elapsed < deadline, "\(outcome.card) took \(outcome.elapsed)")
                if outcome.status != 200 {
                    #expect(outcome.retryable == true, "\(outcome.card): \(outcome.status) \(outcome.code ?? "-") is not retryable")
                }
                #expect(outcome.provisioningID != nil, "an answer without a provisioning id: \(outcome.status)")
            }
            let succeeded = all.filter { $0.status == 200 }.count
            #expect(succeeded > Self.requests / 2, "only \(succeeded) of \(Self.requests) succeeded")

            // None is lost from the audit trail: every answer's provisioning has its final outcome.
            var missing = 0
            for outcome in all {
                guard let id = outcome.provisioningID else { continue }
                let audit = try await CardRegistryAPITests.send(client, .get, "/v1/provisionings/\(id)")
                let events = audit.json["events"] as? [[String: Any]] ?? []
                let final = events.last
                let recorded = outcome.status == 200
                    ? final?["outcome"] as? String == "succeeded"
                    : final?["error_code"] as? String == outcome.code
                if !recorded { missing += 1 }
            }
            #expect(missing == 0, "\(missing) answers without their audit outcome")

            // Memory: the steady state after warm-up must not keep growing with requests.
            let growth = rssAfter - rssAfterWarmUp
            #expect(growth < 64 << 20, "resident memory grew by \(growth >> 20) MiB over \(Self.requests) requests")
        }
    }
}

/// A value under a lock that closures can share.
final class Locked<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>
    init(_ value: Value) { mutex = Mutex(value) }
    func withLock<T>(_ body: (inout Value) -> T) -> T { mutex.withLock { body(&$0) } }
}
