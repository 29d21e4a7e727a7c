import Foundation
import GatewayTestSupport
import Hummingbird
import Issuers
import Logging
import NIOCore
import NIOFoundationCompat
import ProvisioningCore
import Sandbox
import ServiceLifecycle
import Testing

enum Fixtures {
    static func data(_ name: String) throws -> Data {
        let url = try #require(Bundle.module.url(forResource: name, withExtension: nil, subdirectory: "Fixtures"))
        return try Data(contentsOf: url)
    }

    /// The expected payload bytes for a response fixture, from `expected-payloads.json`.
    static func expected(_ name: String) throws -> (activation: Data, encrypted: Data, key: Data) {
        let all = try JSONSerialization.jsonObject(with: data("expected-payloads.json")) as! [String: [String: String]]
        let entry = try #require(all[name])
        return (try #require(Data(hex: entry["activation_data"]!)), try #require(Data(hex: entry["encrypted_pass_data"]!)),
                try #require(Data(hex: entry["ephemeral_public_key"]!)))
    }

    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The sandbox device's request body from Config/sandbox, decoded as the gateway's edge does.
    static func deviceRequest(
        from url: URL = packageRoot.appendingPathComponent("Config/sandbox/apple-pay-request.json")
    ) throws -> ApplePayProvisioningRequest {
        let body = try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as! [String: Any]
        let certificates = (body["certificates"] as! [String]).map { Data(base64Encoded: $0)! }
        return try ApplePayProvisioningRequest(
            certificates: certificates,
            nonce: Data(base64Encoded: body["nonce"] as! String)!,
            nonceSignature: Data(base64Encoded: body["nonce_signature"] as! String)!)
    }

    static func context(id: String = "prv_test_\(UUID().uuidString.prefix(8))", seconds: Int64 = 10, party: String = "") -> ProvisioningContext {
        let clock = GatewayClock.continuous
        return ProvisioningContext(provisioningID: ProvisioningID(id), deadline: clock.now.advanced(by: .seconds(seconds)), clock: clock,
                                   party: party)
    }

    static let logger = Logger(label: "issuers-tests")

    /// A loopback exchange takes milliseconds: the 30 s bounds (connect, and each call unless a
    /// test gives its own) only tolerate a test process whose cooperative pool is backlogged
    /// (the tests' start-up burst kept a task waiting 4 s for a thread, `PoolWatchdog`), where the
    /// connect default (2 s) and then a 5 s call bound failed `UpstreamHTTPTests` cases as
    /// "could not connect in time" in CI. No test using the defaults is about a timeout.
    static func http(_ issuer: IssuerID = "test", requestMS: Int = 30_000, tls: UpstreamTLS? = nil) -> UpstreamHTTP {
        var timeouts = TimeoutConfig()
        timeouts.requestMS = requestMS
        timeouts.connectMS = 30_000
        return UpstreamHTTP(issuer: issuer, timeouts: timeouts, tls: tls, logger: logger)
    }
}

/// Runs a simulator for the duration of `body` and stops it afterwards.
func withSimulator<T: Sendable>(_ server: SimulatorServer, _ body: (URL) async throws -> T) async throws -> T {
    try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { try await server.run() }
        defer { group.cancelAll() }
        return try await body(await server.baseURL())
    }
}

/// A recorded upstream answer replayed over real HTTP, and the request that reached it.
struct CapturedRequest: Sendable {
    let method: String
    let path: String
    let query: String?
    /// Keyed by lowercased name: HTTP header names are case-insensitive.
    let headers: [String: String]
    let body: Data

    func header(_ name: String) -> String? { headers[name.lowercased()] }
}

actor Capture {
    var requests: [CapturedRequest] = []
    func add(_ request: CapturedRequest) { requests.append(request) }
}

struct ReplayMiddleware: RouterMiddleware {
    typealias Context = BasicRequestContext
    let status: HTTPResponse.Status
    let body: Data
    let capture: Capture

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let buffer = try await request.body.collect(upTo: 1 << 20)
        var headers: [String: String] = [:]
        for field in request.headers { headers[field.name.canonicalName.lowercased()] = field.value }
        await capture.add(CapturedRequest(method: request.method.rawValue, path: request.uri.path, query: request.uri.query,
                                          headers: headers, body: Data(buffer: buffer)))
        return Response(status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: body)))
    }
}

/// Serves `body` with `status` to every request on an ephemeral loopback port. The server stops
/// by a graceful shutdown (listener closed first, a short drain), never by cancellation: cancelling
/// a server that may still accept a connection trips a fatal error in NIO (see `SimulatorServer`).
func withReplay<T: Sendable>(status: HTTPResponse.Status, body: Data, _ run: (URL, Capture) async throws -> T) async throws -> T {
    let capture = Capture()
    let router = Router()
    router.add(middleware: ReplayMiddleware(status: status, body: body, capture: capture))
    let (stream, continuation) = AsyncStream.makeStream(of: Int.self)
    let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
                          onServerRunning: { continuation.yield($0.localAddress?.port ?? 0) }, logger: Fixtures.logger)
    var configuration = ServiceGroupConfiguration(services: [app], logger: Fixtures.logger)
    configuration.maximumGracefulShutdownDuration = .milliseconds(200)
    let serviceGroup = ServiceGroup(configuration: configuration)
    return try await withThrowingTaskGroup(of: Void.self) { group in
        // A drain cut short ends the group with an error; stopping was asked for.
        group.addTask { try? await serviceGroup.run() }
        var ports = stream.makeAsyncIterator()
        let result: Result<T, any Error>
        if let port = await ports.next() {
            do {
                result = .success(try await run(URL(string: "http://127.0.0.1:\(port)")!, capture))
            } catch {
                result = .failure(error)
            }
        } else {
            result = .failure(ReplayDidNotStart())
        }
        await serviceGroup.triggerGracefulShutdown()
        try await group.waitForAll()
        return try result.get()
    }
}

struct ReplayDidNotStart: Error {}

/// The keys of a JSON object, nested keys as `a.b`, to compare a request's shape with a document's.
func keyPaths(_ object: Any, prefix: String = "") -> Set<String> {
    guard let dictionary = object as? [String: Any] else { return [] }
    var paths = Set<String>()
    for (key, value) in dictionary {
        let path = prefix.isEmpty ? key : "\(prefix).\(key)"
        paths.insert(path)
        paths.formUnion(keyPaths(value, prefix: path))
    }
    return paths
}

/// An upstream client for one test, shut down afterwards whatever happens.
func withUpstreamHTTP<T: Sendable>(_ issuer: IssuerID = "test", requestMS: Int = 30_000, tls: UpstreamTLS? = nil,
                                   _ body: (UpstreamHTTP) async throws -> T) async throws -> T {
    let http = Fixtures.http(issuer, requestMS: requestMS, tls: tls)
    return try await withCleanup({ try await body(http) }, cleanup: { try await http.shutdown() })
}

/// The `GatewayError` an operation fails with, or nil when it succeeds.
func gatewayError(_ operation: () async throws -> some Any) async -> GatewayError? {
    do {
        _ = try await operation()
        return nil
    } catch let error as GatewayError {
        return error
    } catch {
        Issue.record("failed with \(type(of: error)), not a GatewayError")
        return GatewayError(.internal, "not a GatewayError")
    }
}
