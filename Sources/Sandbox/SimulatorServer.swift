import Foundation
import Hummingbird
import Logging
import NIOCore

/// Runs one simulator as a real HTTP server on an ephemeral loopback port and tells its address.
public final class SimulatorServer: Sendable {
    public let name: String
    /// Where the upstream's API lives on the server, e.g. Bridge's `/v0`.
    public let basePath: String
    private let routes: @Sendable (Router<BasicRequestContext>) -> Void
    private let listening = ListeningPort()
    private let logger: Logger

    init(name: String, basePath: String, logger: Logger, routes: @escaping @Sendable (Router<BasicRequestContext>) -> Void) {
        self.name = name
        self.basePath = basePath
        self.routes = routes
        self.logger = logger
    }

    /// Serves until the calling task is cancelled.
    public func run() async throws {
        let listening = self.listening
        let router = Router()
        routes(router)
        let app = Application(
            router: router,
            configuration: .init(address: .hostname("127.0.0.1", port: 0), serverName: name),
            onServerRunning: { channel in await listening.set(channel.localAddress?.port ?? 0) },
            logger: logger)
        try await app.run()
    }

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
}

public actor SimulatorLog {
    public private(set) var requests: [RecordedRequest] = []
    public init() {}
    func record(_ request: RecordedRequest) { requests.append(request) }
    public var count: Int { requests.count }
}
