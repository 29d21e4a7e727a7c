import Foundation
import Hummingbird
import NIOCore
import Synchronization

/// A fault a simulator plays instead of its normal answer, to show what the gateway does when an
/// upstream misbehaves.
public enum FaultMode: String, Sendable, CaseIterable, Codable {
    /// 503 in the upstream's own error shape.
    case unavailable
    /// 429 with `Retry-After`.
    case throttled
    /// No answer: the request is held until the gateway gives up (then the connection is closed).
    case timeout
    /// The connection is closed while the request is in flight, without an answer.
    case reset
    /// The normal answer, after a delay.
    case slow
    /// 200 with a body that is not the upstream's documented answer.
    case garbage
    /// The upstream's own 400 for a request it refuses.
    case rejected
    /// The normal answer under 202 Accepted, a success status no issuer documents for these calls:
    /// the issuer may well have acted.
    case accepted
}

public struct Fault: Sendable, Equatable {
    public var mode: FaultMode
    /// How many requests it applies to.
    public var count: Int
    /// `slow`: the delay before the normal answer; `timeout`: how long the request is held
    /// (default 30 s, longer than any per-try timeout worth having).
    public var delay: Duration?
    /// `throttled`: the `Retry-After` seconds (default 1).
    public var retryAfterSeconds: Int?
    /// Set by a test in the same process (the fault route takes none): the request is held until
    /// the gate is opened, then the fault plays (`slow`: the normal answer, without a delay), so
    /// that what a test does while a request is held at the upstream needs no window of real
    /// time. `delay` (default 30 s) then bounds the hold, and so does the caller closing the
    /// connection.
    public var gate: FaultGate?

    public init(mode: FaultMode, count: Int = 1, delay: Duration? = nil, retryAfterSeconds: Int? = nil, gate: FaultGate? = nil) {
        self.mode = mode
        self.count = count
        self.delay = delay
        self.retryAfterSeconds = retryAfterSeconds
        self.gate = gate
    }
}

/// What a gated fault waits for: opened once, by the test, for every request it holds.
public final class FaultGate: Sendable, Equatable {
    private let state = Mutex<(open: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    public init() {}

    public func open() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.open = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Returns once the gate is open (at once if it is); not cut short by cancellation, so a
    /// waiter is raced against a bound by its caller.
    func opened() async {
        await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
            let now = state.withLock { state -> Bool in
                guard !state.open else { return true }
                state.waiters.append(waiter)
                return false
            }
            if now { waiter.resume() }
        }
    }

    public static func == (lhs: FaultGate, rhs: FaultGate) -> Bool { lhs === rhs }
}

/// The faults queued at one simulator, played in order, each for its count of requests.
public actor SimulatorFaults {
    /// The most faults one simulator holds queued: the queue is memory any client of the sandbox
    /// can add to, so it has a bound (each fault already plays for up to 10,000 requests).
    public static let maxQueued = 64

    private var queue: [Fault] = []

    public init() {}

    /// False, and nothing queued, when `maxQueued` faults are already waiting.
    @discardableResult
    public func add(_ fault: Fault) -> Bool {
        guard fault.count > 0 else { return true }
        guard queue.count < Self.maxQueued else { return false }
        queue.append(fault)
        return true
    }

    public func clear() { queue.removeAll() }

    /// The faults still to play.
    public var pending: [Fault] { queue }

    /// The fault for the next request, if any (its count goes down by one).
    func take() -> Fault? {
        guard var head = queue.first else { return nil }
        head.count -= 1
        if head.count == 0 { queue.removeFirst() } else { queue[0] = head }
        return head
    }
}

/// The request context of every simulator: Hummingbird's basic one plus the connection, so the
/// `reset` fault can close it.
public struct SimulatorContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    public let channel: any Channel

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        channel = source.channel
    }
}

/// Records every request a simulator sees and plays queued faults before the route runs.
struct SimulatorMiddleware: RouterMiddleware {
    typealias Context = SimulatorContext
    let log: SimulatorLog
    let faults: SimulatorFaults
    /// The upstream's own error body for a status, code and message.
    let errorResponse: @Sendable (HTTPResponse.Status, String, String) -> Response

    func handle(_ request: Request, context: SimulatorContext, next: (Request, SimulatorContext) async throws -> Response) async throws -> Response {
        let idempotencyKey = SimulatorHTTP.header(request, "Idempotency-Key")
        let method = request.method.rawValue
        let path = request.uri.path
        let traceparent = SimulatorHTTP.header(request, "traceparent")
        let tracestate = SimulatorHTTP.header(request, "tracestate")
        guard let fault = await faults.take() else {
            let response = try await next(request, context)
            await log.record(.init(method: method, path: path, status: Int(response.status.code), idempotencyKey: idempotencyKey,
                                 traceparent: traceparent, tracestate: tracestate))
            return response
        }
        if let gate = fault.gate {
            // Held until the gate opens, the bound passes or the caller closes the connection
            // (a hold that ends otherwise opens the gate, so that its waiter returns).
            // (A wait on the close future itself would not end on cancellation.)
            context.channel.closeFuture.whenComplete { _ in gate.open() }
            await withTaskGroup(of: Void.self) { group in
                group.addTask { await gate.opened() }
                group.addTask { try? await Task.sleep(for: fault.delay ?? .seconds(30)) }
                await group.next()
                gate.open()
                group.cancelAll()
            }
        }
        let status: Int
        let response: Response
        switch fault.mode {
        case .unavailable:
            response = errorResponse(.serviceUnavailable, "unavailable", "Service temporarily unavailable")
            status = 503
        case .throttled:
            var throttled = errorResponse(.tooManyRequests, "rate_limited", "Too many requests")
            throttled.headers[.retryAfter] = "\(fault.retryAfterSeconds ?? 1)"
            response = throttled
            status = 429
        case .rejected:
            response = errorResponse(.badRequest, "invalid_request", "The request was rejected")
            status = 400
        case .garbage:
            response = Response(status: .ok, headers: [.contentType: "application/json"],
                                body: .init(byteBuffer: ByteBuffer(string: #"{"unexpected": [1, 2"#)))
            status = 200
        case .accepted:
            var answer = try await next(request, context)
            answer.status = .accepted
            response = answer
            status = 202
        case .slow:
            // A gated fault has been held already.
            if fault.gate == nil { try? await Task.sleep(for: fault.delay ?? .seconds(1)) }
            let answer = try await next(request, context)
            await log.record(.init(method: method, path: path, status: Int(answer.status.code), idempotencyKey: idempotencyKey,
                                 traceparent: traceparent, tracestate: tracestate))
            return answer
        case .timeout, .reset:
            // Recorded before the wait: the request did arrive.
            await log.record(.init(method: method, path: path, status: 0, idempotencyKey: idempotencyKey,
                                 traceparent: traceparent, tracestate: tracestate))
            let channel = context.channel
            if fault.mode == .timeout {
                // Held until the delay passes or the caller gives up and closes the connection,
                // whichever comes first: nothing sleeps on after the request is gone.
                let closed = channel.closeFuture
                await withTaskGroup(of: Void.self) { group in
                    group.addTask { try? await Task.sleep(for: fault.delay ?? .seconds(30)) }
                    group.addTask { try? await closed.get() }
                    await group.next()
                    group.cancelAll()
                    channel.close(promise: nil)
                }
            }
            try? await channel.close()
            throw CancellationError()
        }
        await log.record(.init(method: method, path: path, status: status, idempotencyKey: idempotencyKey,
                                 traceparent: traceparent, tracestate: tracestate))
        return response
    }
}
