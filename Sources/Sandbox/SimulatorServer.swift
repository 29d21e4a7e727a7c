import Foundation
import Hummingbird
import Logging
import NIOCore
import ServiceLifecycle

/// Runs one simulator as a real HTTP server on an ephemeral loopback port and tells its address.
public final class SimulatorServer: Sendable {
    public let name: String
    /// Where the upstream's API lives on the server, e.g. Bridge's `/v0`.
    public let basePath: String
    private let routes: @Sendable (Router<SimulatorContext>) -> Void
    private let middleware: SimulatorMiddleware
    private let listening = ListeningPort()
    private let logger: Logger

    init(
        name: String, basePath: String, logger: Logger, log: SimulatorLog, faults: SimulatorFaults,
        errorResponse: @escaping @Sendable (HTTPResponse.Status, String, String) -> Response,
        routes: @escaping @Sendable (Router<SimulatorContext>) -> Void
    ) {
        self.name = name
        self.basePath = basePath
        self.routes = routes
        self.middleware = SimulatorMiddleware(log: log, faults: faults, errorResponse: errorResponse)
        self.logger = logger
    }

    /// Serves until a graceful shutdown (when run in a service group) or until the calling task is
    /// cancelled. Either way the listener closes first and requests still in flight get
    /// `drainLimit` before they are abandoned: cancelling a server that may still accept a
    /// connection trips a fatal error in NIO (a child channel's writer released unfinished).
    public func run() async throws {
        let listening = self.listening
        let router = Router(context: SimulatorContext.self)
        router.add(middleware: middleware)
        routes(router)
        let app = Application(
            router: router,
            configuration: .init(address: .hostname("127.0.0.1", port: 0), serverName: name),
            onServerRunning: { channel in await listening.set(channel.localAddress?.port ?? 0) },
            logger: logger)
        var configuration = ServiceGroupConfiguration(services: [app], logger: logger)
        configuration.maximumGracefulShutdownDuration = Self.drainLimit
        let group = ServiceGroup(configuration: configuration)
        // Not a child task: the caller's cancellation must not reach the server before its
        // listener has closed. It still hears a graceful shutdown of the caller's group.
        let serving = Task { try await group.run() }
        do {
            try await withTaskCancellationHandler {
                try await serving.value
            } onCancel: {
                Task { await group.triggerGracefulShutdown() }
            }
        } catch {
            // Requests abandoned after the drain limit end the group with an error; stopping
            // was asked for, so that is the expected end.
            if Task.isCancelled || Task.isShuttingDownGracefully { return }
            throw error
        }
    }

    /// How long requests in flight (a held `timeout` fault) may run once the simulator stops.
    static let drainLimit: Duration = .milliseconds(200)

    /// The upstream's API base URL once the server listens (`http://127.0.0.1:<port><basePath>`).
    public func baseURL() async -> URL {
        URL(string: "http://127.0.0.1:\(await listening.wait())\(basePath)")!
    }
}

actor ListeningPort {
    private var port: Int?
    private var waiters: [CheckedContinuation<Int, Never>] = []

    func set(_ port: Int) {
        self.port = port
        for waiter in waiters { waiter.resume(returning: port) }
        waiters.removeAll()
    }

    func wait() async -> Int {
        if let port { return port }
        return await withCheckedContinuation { waiters.append($0) }
    }
}

/// What a simulator saw, for tests and the sandbox's own accounting. Never holds payloads.
public struct RecordedRequest: Sendable, Equatable {
    public let method: String
    public let path: String
    public let status: Int
    public let idempotencyKey: String?
    /// The W3C trace context the caller sent (trace ids only), to check it is propagated.
    public let traceparent: String?
    public let tracestate: String?
}

/// Keeps the most recent `limit` requests (a sandbox may run for days) and counts them all.
public actor SimulatorLog {
    public static let limit = 10_000
    public private(set) var requests: [RecordedRequest] = []
    public private(set) var count = 0
    public init() {}
    func record(_ request: RecordedRequest) {
        count += 1
        requests.append(request)
        if requests.count > Self.limit { requests.removeFirst(requests.count - Self.limit / 2) }
    }
}
