import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOFoundationCompat
import NIOHTTP1
import NIOPosix
import NIOSSL
import NIOTLS
import ProvisioningCore
import Synchronization

/// What can go wrong on the way to an issuer, in the terms `UpstreamHTTP.map` needs: whether any
/// byte of the request may have left (everything but `connect` and `waitedTooLong` says it may).
enum UpstreamTransportError: Error, Sendable {
    /// The connection (TCP, then TLS) could not be made: nothing of the request was sent.
    case connect(any Error)
    /// No connection to the host was free within the per-try timeout: nothing was sent. Bare,
    /// it is the pool's own saturation (the call waited for connections other calls held); inside
    /// `connect`, the connection could not be made in the time left.
    case waitedTooLong
    /// The per-try timeout passed after the request was handed to the connection.
    case timedOut
    /// `timedOut`, after the call had waited at least half its time for a connection other calls
    /// held (`UpstreamConnectionPool.mostlyQueued`): the request may have been sent, but the
    /// issuer had less than half the try's time to answer, which says nothing of its health.
    case timedOutAfterQueueing
    /// The connection closed before the whole answer arrived.
    case closedBeforeAnswer
    /// The answer's body is larger than `UpstreamHTTP.maxResponseBytes`.
    case answerTooLarge
    /// Inside `connect`: the TLS handshake did not finish within the try's time; nothing was sent.
    case handshakeTooLong
    /// `101 Switching Protocols`: after it SwiftNIO's decoder parses nothing more and keeps every
    /// byte that follows, without a bound (an issuer streaming after a 101 took the gateway to
    /// 1.9 GB in one per-try timeout; the upstream audit). No issuer's contract has one.
    case switchedProtocols
    /// The URL is not `http` or `https` with a host.
    case unsupportedURL
    /// `shutdown()` was called.
    case shutDown
}

/// One exchange's input, handed to the connection's `UpstreamExchangeHandler` as an outbound message.
struct UpstreamExchange: Sendable {
    let head: HTTPRequestHead
    let body: ByteBuffer?
    let timeout: TimeAmount
    let promise: EventLoopPromise<UpstreamHTTP.Response>
    /// The call's hold on its connection, given back when the exchange ends (before the
    /// connection goes to the next waiting call, so the choice sees it gone).
    let lease: PartyLease
    /// Set by the caller's cancellation, from any thread: an exchange that finds it set when it
    /// reaches the handler is never sent.
    let cancellation = ExchangeCancellation()
}

/// One call's claim on a connection of a host, on behalf of its party (the client it is made
/// for): granted once (a connection or a slot to open one), given back once, whichever path
/// ends the call. The pool counts each party's granted leases per host under its lock.
final class PartyLease: Sendable {
    let party: String
    /// 0 waiting, 1 granted, 2 given back; changed only under the pool's lock.
    private let phase = Atomic<UInt8>(0)
    init(party: String) { self.party = party }

    /// True the first time: the lease now counts against its party.
    func grant() -> Bool { phase.compareExchange(expected: 0, desired: 1, ordering: .relaxed).exchanged }
    /// True once, for a granted lease: it no longer counts.
    func giveBack() -> Bool { phase.compareExchange(expected: 1, desired: 2, ordering: .relaxed).exchanged }
    /// Granted and not given back yet (read without the lock: only to skip taking it).
    var isOutstanding: Bool { phase.load(ordering: .relaxed) == 1 }
}

final class ExchangeCancellation: Sendable {
    private let flag = Atomic<Bool>(false)
    func cancel() { flag.store(true, ordering: .releasing) }
    var isCancelled: Bool { flag.load(ordering: .acquiring) }
}

/// HTTP/1.1 connections to one issuer's hosts on SwiftNIO, kept open between calls: a call takes an
/// idle connection (the one used last first) or opens one, up to `maxConnectionsPerHost`; beyond
/// that it waits its turn, within its timeout. Turns are fair between parties (the clients calls
/// are made for): a connection freed goes to the waiting call whose party holds the fewest of the
/// host's connections now, among equals the party served longest ago, and within a party to its
/// first waiter; so a tenant whose burst fills the pool cannot keep another tenant's calls to an
/// issuer account they share waiting behind all of its own. A connection goes back to the idle list only after a
/// whole answer that allows it (`Connection: close` closes it), and one the issuer closed, or idle for
/// longer than `idleTimeout`, is never used again. Nothing here retries: one call, at most one
/// request on the wire, and the caller's resilience runtime decides what follows a failure.
final class UpstreamConnectionPool: Sendable {
    struct Target: Hashable, Sendable {
        let https: Bool
        let host: String
        let port: Int
    }

    /// Handed to a waiting call: an idle connection, or a free slot to open one in.
    enum Lease: Sendable {
        case channel(any Channel)
        case open
    }

    private struct Idle {
        let channel: any Channel
        /// When it went idle, on the pool's clock.
        let since: GatewayClock.Instant
    }

    private struct Waiter {
        let id: Int
        let promise: EventLoopPromise<Lease>
        let lease: PartyLease
    }

    private struct Host {
        var idle: [Idle] = []
        /// Connecting, idle and in use.
        var open = 0
        var waiters: [Waiter] = []
        /// Granted leases by party (none kept at zero).
        var held: [String: Int] = [:]
        /// When each party was last granted a lease (`grants` then), to break ties between
        /// parties holding as many: the one served longest ago goes first.
        var lastGranted: [String: UInt64] = [:]
        var grants: UInt64 = 0

        /// Counts `lease` against its party (once).
        mutating func grant(_ lease: PartyLease) {
            guard lease.grant() else { return }
            held[lease.party, default: 0] += 1
            grants += 1
            lastGranted[lease.party] = grants
            // Bounded: parties are clients, but forget the ones neither holding nor waiting.
            if lastGranted.count > 1_024 {
                let waiting = Set(waiters.map(\.lease.party))
                lastGranted = lastGranted.filter { held[$0.key] != nil || waiting.contains($0.key) }
            }
        }

        /// `lease` no longer counts (once, and only if it was granted).
        mutating func giveBack(_ lease: PartyLease) {
            guard lease.giveBack(), let count = held[lease.party] else { return }
            held[lease.party] = count > 1 ? count - 1 : nil
        }

        /// Takes the waiter whose turn it is (see the type's comment) and grants its lease.
        mutating func nextWaiter() -> Waiter? {
            guard !waiters.isEmpty else { return nil }
            var chosen = 0
            var best = (held[waiters[0].lease.party] ?? 0, lastGranted[waiters[0].lease.party] ?? 0)
            for index in waiters.indices.dropFirst() {
                let party = waiters[index].lease.party
                let rank = (held[party] ?? 0, lastGranted[party] ?? 0)
                if rank < best {
                    best = rank
                    chosen = index
                }
            }
            let waiter = waiters.remove(at: chosen)
            grant(waiter.lease)
            return waiter
        }
    }

    private struct State {
        var hosts: [Target: Host] = [:]
        var nextWaiter = 0
        var shutDown = false
    }

    private let state = NIOLockedValueBox(State())
    private let group: any EventLoopGroup
    private let connectTimeout: TimeAmount
    private let maxConnectionsPerHost: Int
    private let idleTimeout: Duration
    /// Decides how old an idle connection is (tests drive it); I/O timeouts run on the event loops.
    private let clock: GatewayClock
    /// The TLS context of HTTPS calls, or why none could be made (every HTTPS call fails with it).
    private let tls: Result<NIOSSLContext, any Error>

    init(
        group: any EventLoopGroup, connectTimeout: TimeAmount, tls: TLSConfiguration?,
        maxConnectionsPerHost: Int, idleTimeout: Duration, clock: GatewayClock
    ) {
        self.clock = clock
        self.group = group
        self.connectTimeout = connectTimeout
        self.maxConnectionsPerHost = max(1, maxConnectionsPerHost)
        self.idleTimeout = idleTimeout
        // Made once: loading the roots and the client certificate is the expensive part of TLS set-up.
        self.tls = tls.map { tls in Result { try NIOSSLContext(configuration: Self.forHTTP1(tls)) } } ?? Self.systemRootsContext
    }

    private static func forHTTP1(_ tls: TLSConfiguration) -> TLSConfiguration {
        var configuration = tls
        configuration.applicationProtocols = ["http/1.1"]
        return configuration
    }

    /// The context of every pool without a TLS configuration of its own (the system's roots, no
    /// client certificate): made once per process and shared, as a context may be. Each pool had
    /// made its own, parsing and sorting the system's whole bundle of roots (about 140) each time:
    /// one pool per issuer, again at every configuration reload, on a thread of Swift's cooperative
    /// pool. A bundle the system changes later is read at the next start.
    private static let systemRootsContext: Result<NIOSSLContext, any Error> = Result {
        try NIOSSLContext(configuration: forHTTP1(TLSConfiguration.makeClientConfiguration()))
    }

    /// Sends one request and gathers its whole answer. `timeout` bounds all of it: waiting for a
    /// connection, connecting, sending and reading.
    func execute(
        _ target: Target, head: HTTPRequestHead, body: ByteBuffer?, timeout: TimeAmount, party: String = ""
    ) async throws -> UpstreamHTTP.Response {
        let deadline = NIODeadline.now() + timeout
        let partyLease = PartyLease(party: party)
        // Whichever way the call ends; a no-op once the exchange gave it back itself.
        defer { giveBack(partyLease, target: target) }
        var queued = TimeAmount.zero
        let channel: any Channel
        do {
            channel = try await lease(target, deadline: deadline, partyLease, queued: &queued)
        } catch UpstreamTransportError.connect(let cause) where Self.isWaitedTooLong(cause) && Self.mostlyQueued(queued, of: timeout) {
            // Handed a free slot after waiting most of the try for it, with no time left to connect.
            throw UpstreamTransportError.waitedTooLong
        }
        let left = deadline - NIODeadline.now()
        let mostlyQueued = Self.mostlyQueued(queued, of: timeout)
        guard left > .zero else {
            // Getting the connection (connecting and its TLS handshake, or a wait handed one over
            // at the last moment) took all the time: the request is not sent late, and the
            // connection is kept. Said as a connection not made in time, which it is to the caller;
            // as the pool's own saturation when most of that time went waiting for other calls.
            release(channel, target: target, from: partyLease)
            throw mostlyQueued ? UpstreamTransportError.waitedTooLong : UpstreamTransportError.connect(UpstreamTransportError.waitedTooLong)
        }
        do {
            return try await exchange(channel, head: head, body: body, timeout: left, partyLease)
        } catch UpstreamTransportError.timedOut where mostlyQueued {
            throw UpstreamTransportError.timedOutAfterQueueing
        }
    }

    /// Whether a call that waited `queued` for connections other calls held spent at least half
    /// of its `timeout` so: a failure in the time left is then the pool's saturation as much as the
    /// issuer's, and no circuit breaker counts it (`GatewayError.ownPoolSaturated`). A call that
    /// found a connection, or waited briefly, gave the issuer most of the try's time.
    static func mostlyQueued(_ queued: TimeAmount, of timeout: TimeAmount) -> Bool {
        queued.nanoseconds > 0 && queued.nanoseconds * 2 >= timeout.nanoseconds
    }

    private static func isWaitedTooLong(_ error: any Error) -> Bool {
        if case UpstreamTransportError.waitedTooLong? = error as? UpstreamTransportError { return true }
        return false
    }

    /// The exchange on a leased connection, within `left`.
    private func exchange(
        _ channel: any Channel, head: HTTPRequestHead, body: ByteBuffer?, timeout left: TimeAmount, _ partyLease: PartyLease
    ) async throws -> UpstreamHTTP.Response {
        let promise = channel.eventLoop.makePromise(of: UpstreamHTTP.Response.self)
        let exchange = UpstreamExchange(head: head, body: body, timeout: left, promise: promise, lease: partyLease)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (caller: CheckedContinuation<UpstreamHTTP.Response, any Error>) in
                // One hop to the connection's event loop, which writes the exchange and hands the
                // answer back. A write and two callbacks added from this task's thread would each
                // be a hop of their own (a wake-up of a sleeping loop, a write to its eventfd).
                channel.eventLoop.execute {
                    // The connection was gone before the exchange reached its handler (which fails
                    // the exchange itself for anything later): the request may have been partly written.
                    channel.writeAndFlush(exchange).whenFailure { _ in promise.fail(UpstreamTransportError.closedBeforeAnswer) }
                    // Only after the write: an exchange cancelled before it started gives its
                    // connection back in the handler's write, so the caller, resumed here, finds
                    // it idle for its next request (resumed before the write, it opened a second
                    // connection; found under ThreadSanitizer's slowdown).
                    promise.futureResult.whenComplete { caller.resume(with: $0) }
                }
            }
        } onCancel: {
            // The caller left. An exchange not yet started is never sent (the handler checks the
            // flag), and its connection goes back to the pool. One under way leaves the connection
            // in an unknown state, so the connection is closed, which ends it. Only the handler,
            // on the connection's loop, knows whether it is still under way: once it is over, the
            // connection is the pool's again, and may be carrying another call's exchange.
            exchange.cancellation.cancel()
            promise.fail(CancellationError())
            channel.eventLoop.execute {
                guard let context = try? channel.pipeline.syncOperations.context(handlerType: UpstreamExchangeHandler.self),
                      let handler = context.handler as? UpstreamExchangeHandler else { return }
                handler.cancel(promise.futureResult, context: context)
            }
        }
    }

    /// The connections open now (idle ones included), the idle ones among them, and the calls
    /// waiting for one, over all hosts.
    var counts: UpstreamHTTP.ConnectionCounts {
        state.withLockedValue { state in
            state.hosts.values.reduce(into: UpstreamHTTP.ConnectionCounts()) { counts, host in
                counts.open += host.open
                counts.idle += host.idle.count
                counts.waiting += host.waiters.count
            }
        }
    }

    /// Leases counted against parties now, over all hosts: zero once every call has ended
    /// (tests check that no path keeps one).
    var leasesHeld: Int {
        state.withLockedValue { state in state.hosts.values.reduce(0) { $0 + $1.held.values.reduce(0, +) } }
    }

    /// Closes the idle connections and fails the calls waiting for one; calls made afterwards fail at once.
    func shutdown() async {
        let (idle, waiters) = state.withLockedValue { state -> ([any Channel], [Waiter]) in
            state.shutDown = true
            let idle = state.hosts.values.flatMap { $0.idle.map(\.channel) }
            let waiters = state.hosts.values.flatMap(\.waiters)
            for key in state.hosts.keys {
                state.hosts[key]?.idle = []
                state.hosts[key]?.waiters = []
            }
            return (idle, waiters)
        }
        for waiter in waiters { waiter.promise.fail(UpstreamTransportError.shutDown) }
        for channel in idle { try? await channel.close() }
    }

    // MARK: Leasing

    private enum Step {
        case use(any Channel)
        case open
        case wait(Waiter)
        case refuse
    }

    /// A connection for `target`; `queued` adds the time spent waiting for one that other calls
    /// held (not the time connecting).
    private func lease(_ target: Target, deadline: NIODeadline, _ partyLease: PartyLease, queued: inout TimeAmount) async throws -> any Channel {
        while true {
            let now = clock.now
            var stale: [any Channel] = []
            let step = state.withLockedValue { state -> Step in
                guard !state.shutDown else { return .refuse }
                var host = state.hosts[target] ?? Host()
                defer { state.hosts[target] = host }
                while let idle = host.idle.popLast() {
                    if idle.channel.isActive, idle.since.duration(to: now) < idleTimeout {
                        host.grant(partyLease)
                        return .use(idle.channel)
                    }
                    stale.append(idle.channel)
                }
                if host.open < maxConnectionsPerHost {
                    host.open += 1
                    host.grant(partyLease)
                    return .open
                }
                let waiter = Waiter(id: state.nextWaiter, promise: group.any().makePromise(of: Lease.self), lease: partyLease)
                state.nextWaiter += 1
                host.waiters.append(waiter)
                return .wait(waiter)
            }
            // Their close runs `closed(_:)`, which frees their slots.
            for channel in stale { channel.close(promise: nil) }
            switch step {
            case .refuse:
                throw UpstreamTransportError.shutDown
            case .use(let channel):
                return channel
            case .open:
                return try await open(target, deadline: deadline)
            case .wait(let waiter):
                // The wait alone: connecting after it (a slot handed over) is the issuer's time.
                let waitStarted = NIODeadline.now()
                let lease: Lease
                do {
                    lease = try await wait(waiter, target: target, deadline: deadline)
                    queued = queued + (NIODeadline.now() - waitStarted)
                } catch {
                    queued = queued + (NIODeadline.now() - waitStarted)
                    throw error
                }
                switch lease {
                case .channel(let channel) where channel.isActive:
                    return channel
                case .channel(let channel):
                    channel.close(promise: nil)
                case .open:
                    return try await open(target, deadline: deadline)
                }
            }
        }
    }

    private func wait(_ waiter: Waiter, target: Target, deadline: NIODeadline) async throws -> Lease {
        let loop = waiter.promise.futureResult.eventLoop
        let expiry = loop.scheduleTask(deadline: deadline) { [self] in
            if removeWaiter(waiter.id, target: target) { waiter.promise.fail(UpstreamTransportError.waitedTooLong) }
        }
        defer { expiry.cancel() }
        return try await withTaskCancellationHandler {
            try await waiter.promise.futureResult.get()
        } onCancel: {
            if removeWaiter(waiter.id, target: target) { waiter.promise.fail(CancellationError()) }
        }
    }

    private func removeWaiter(_ id: Int, target: Target) -> Bool {
        state.withLockedValue { state in
            guard let index = state.hosts[target]?.waiters.firstIndex(where: { $0.id == id }) else { return false }
            state.hosts[target]?.waiters.remove(at: index)
            return true
        }
    }

    /// A slot freed (a connection closed, or one could not be made): the waiter whose turn it is
    /// may open one.
    private func slotFreed(_ target: Target) {
        let waiter = state.withLockedValue { state -> Waiter? in
            guard var host = state.hosts[target] else { return nil }
            defer { state.hosts[target] = host }
            host.open -= 1
            guard let waiter = host.nextWaiter() else { return nil }
            host.open += 1
            return waiter
        }
        waiter?.promise.succeed(.open)
    }

    /// The call holding `partyLease` is over: its party holds one connection fewer.
    func giveBack(_ partyLease: PartyLease, target: Target) {
        // Most calls gave theirs back with their answer (`release`): no second trip to the lock.
        guard partyLease.isOutstanding else { return }
        state.withLockedValue { state in state.hosts[target]?.giveBack(partyLease) }
    }

    /// After a whole answer on a connection that stays open (its call's lease given back first):
    /// to the waiter whose turn it is, else to the idle list; closed once the pool is shut down.
    func release(_ channel: any Channel, target: Target, from partyLease: PartyLease) {
        enum Handoff { case kept, waiter(Waiter), close }
        // Closing runs `closed(_:)`, which takes the lock: never inside it.
        let handoff = state.withLockedValue { state -> Handoff in
            state.hosts[target]?.giveBack(partyLease)
            guard !state.shutDown else { return .close }
            var host = state.hosts[target] ?? Host()
            defer { state.hosts[target] = host }
            if let waiter = host.nextWaiter() { return .waiter(waiter) }
            host.idle.append(Idle(channel: channel, since: clock.now))
            return .kept
        }
        switch handoff {
        case .kept: break
        case .waiter(let waiter): waiter.promise.succeed(.channel(channel))
        case .close: channel.close(promise: nil)
        }
    }

    private func closed(_ channel: any Channel, target: Target) {
        state.withLockedValue { state in
            state.hosts[target]?.idle.removeAll { $0.channel === channel }
        }
        slotFreed(target)
    }

    // MARK: Connecting

    private func open(_ target: Target, deadline: NIODeadline) async throws -> any Channel {
        let channel: any Channel
        let handshake: EventLoopFuture<Void>?
        do {
            (channel, handshake) = try await connect(target, deadline: deadline)
        } catch {
            slotFreed(target)
            throw error
        }
        // From here the slot is the channel's, freed when it closes (at once if it already has).
        channel.closeFuture.whenComplete { [self] _ in closed(channel, target: target) }
        if let handshake {
            // The handshake ends by the try's deadline, and with the caller: an issuer that
            // accepted the connection and then stalled its handshake had held the call, and its
            // slot, past its deadline, and a stop past the shutdown timeout (the send-twice
            // audit; a future's wait does not end on cancellation).
            let late = NIOLockedValueBox(false)
            let expiry = channel.eventLoop.scheduleTask(deadline: deadline) {
                late.withLockedValue { $0 = true }
                channel.close(promise: nil)
            }
            defer { expiry.cancel() }
            do {
                // The waiter's own future, kept from the channel's set-up: looked up in the
                // pipeline, it was gone when a refused handshake had already closed the channel,
                // and the reason (CERTIFICATE_VERIFY_FAILED) with it.
                try await withTaskCancellationHandler {
                    try await handshake.get()
                } onCancel: {
                    channel.close(promise: nil)
                }
            } catch {
                channel.close(promise: nil)
                if late.withLockedValue({ $0 }) { throw UpstreamTransportError.connect(UpstreamTransportError.handshakeTooLong) }
                if Task.isCancelled { throw CancellationError() }
                throw UpstreamTransportError.connect(error)
            }
        }
        return channel
    }

    /// The connected channel, and for HTTPS its handshake's outcome.
    private func connect(_ target: Target, deadline: NIODeadline) async throws -> (any Channel, EventLoopFuture<Void>?) {
        let sslContext: NIOSSLContext?
        if target.https {
            sslContext = try tls.mapError { UpstreamTransportError.connect($0) }.get()
        } else {
            sslContext = nil
        }
        // An IP address is not a server name (SNI); NIOSSL then checks the certificate against the address.
        let serverName = (try? SocketAddress(ipAddress: target.host, port: 0)) == nil ? target.host : nil
        let timeout = min(connectTimeout, deadline - NIODeadline.now())
        guard timeout > .zero else { throw UpstreamTransportError.connect(UpstreamTransportError.waitedTooLong) }
        let handshake = NIOLockedValueBox<EventLoopFuture<Void>?>(nil)
        let bootstrap = ClientBootstrap(group: group)
            .connectTimeout(timeout)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { [self] channel in
                do {
                    let sync = channel.pipeline.syncOperations
                    if let sslContext {
                        try sync.addHandler(NIOSSLClientHandler(context: sslContext, serverHostname: serverName))
                        let waiter = TLSHandshakeWaiter(promise: channel.eventLoop.makePromise())
                        handshake.withLockedValue { $0 = waiter.handshake }
                        try sync.addHandler(waiter)
                    }
                    try sync.addHTTPClientHandlers()
                    try sync.addHandler(UpstreamExchangeHandler(pool: self, target: target))
                    return channel.eventLoop.makeSucceededVoidFuture()
                } catch {
                    return channel.eventLoop.makeFailedFuture(error)
                }
            }
        do {
            let channel = try await bootstrap.connect(host: target.host, port: target.port).get()
            return (channel, handshake.withLockedValue { $0 })
        } catch {
            throw UpstreamTransportError.connect(error)
        }
    }
}

/// Completes when the TLS handshake has (the request is written only then, so a failed handshake
/// is known to have sent nothing) or fails with the reason it did not.
final class TLSHandshakeWaiter: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny
    private let promise: EventLoopPromise<Void>
    var handshake: EventLoopFuture<Void> { promise.futureResult }

    init(promise: EventLoopPromise<Void>) { self.promise = promise }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case .handshakeCompleted = event as? TLSUserEvent { promise.succeed(()) }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        promise.fail(error)
        context.fireErrorCaught(error)
    }

    func channelInactive(context: ChannelHandlerContext) {
        promise.fail(UpstreamTransportError.closedBeforeAnswer)
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        promise.fail(UpstreamTransportError.closedBeforeAnswer)
    }
}

/// One exchange at a time on one connection: writes the request, gathers the answer up to the
/// bound, enforces the timeout on the connection's own event loop, and hands the connection back
/// to the pool when the answer allows it.
final class UpstreamExchangeHandler: ChannelDuplexHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundIn = UpstreamExchange
    typealias OutboundOut = HTTPClientRequestPart

    private struct Current {
        let promise: EventLoopPromise<UpstreamHTTP.Response>
        let lease: PartyLease
        let timeout: Scheduled<Void>
        var requestKeepAlive: Bool
        var head: HTTPResponseHead?
        var body: ByteBuffer?
    }

    private let pool: UpstreamConnectionPool
    private let target: UpstreamConnectionPool.Target
    private var current: Current?

    init(pool: UpstreamConnectionPool, target: UpstreamConnectionPool.Target) {
        self.pool = pool
        self.target = target
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let exchange = unwrapOutboundIn(data)
        if exchange.cancellation.isCancelled, current == nil, context.channel.isActive {
            // Its caller left before it started: nothing of it is written, and the connection is
            // as clean as it came.
            exchange.promise.fail(CancellationError())
            promise?.fail(CancellationError())
            pool.release(context.channel, target: target, from: exchange.lease)
            return
        }
        guard current == nil, context.channel.isActive else {
            // Never two exchanges on one connection at once (the pool hands it to one caller).
            exchange.promise.fail(UpstreamTransportError.closedBeforeAnswer)
            promise?.fail(ChannelError.inappropriateOperationForState)
            return
        }
        let timeout = context.eventLoop.assumeIsolated().scheduleTask(in: exchange.timeout) { [self] in
            finish(context, .failure(UpstreamTransportError.timedOut), reusable: false)
        }
        current = Current(promise: exchange.promise, lease: exchange.lease, timeout: timeout, requestKeepAlive: exchange.head.isKeepAlive)
        context.write(wrapOutboundOut(.head(exchange.head)), promise: nil)
        if let body = exchange.body { context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil) }
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: promise)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard var exchange = current else { return }
        switch unwrapInboundIn(data) {
        case .head(let head):
            // Never an answer to wait past: the connection is closed at once.
            if head.status == .switchingProtocols {
                return finish(context, .failure(UpstreamTransportError.switchedProtocols), reusable: false)
            }
            // Other 1xx answers (100 Continue) precede the real one.
            guard head.status.code >= 200 else { return }
            if let length = head.headers.first(name: "content-length").flatMap(Int.init), length > UpstreamHTTP.maxResponseBytes {
                return finish(context, .failure(UpstreamTransportError.answerTooLarge), reusable: false)
            }
            exchange.head = head
            current = exchange
        case .body(var part):
            guard exchange.head != nil else { return }
            current = nil  // no copy of the buffer while it grows
            if exchange.body == nil {
                exchange.body = part
            } else {
                exchange.body!.writeBuffer(&part)
            }
            current = exchange
            if exchange.body!.readableBytes > UpstreamHTTP.maxResponseBytes {
                finish(context, .failure(UpstreamTransportError.answerTooLarge), reusable: false)
            }
        case .end:
            guard let head = exchange.head else { return }
            let body = exchange.body ?? ByteBuffer()
            let response = UpstreamHTTP.Response(status: Int(head.status.code), headers: head.headers, body: Data(buffer: body))
            finish(context, .success(response), reusable: exchange.requestKeepAlive && head.isKeepAlive)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        finish(context, .failure(UpstreamTransportError.closedBeforeAnswer), reusable: false)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        finish(context, .failure(error), reusable: false)
        context.close(promise: nil)
    }

    /// The caller of `exchange` gave up: its exchange ends, closing the connection, if it is the one
    /// under way; nothing happens once it is over (the connection may be serving another exchange
    /// by now), and one not started yet is never sent (`write` checks its cancellation).
    func cancel(_ exchange: EventLoopFuture<UpstreamHTTP.Response>, context: ChannelHandlerContext) {
        if let current, current.promise.futureResult === exchange {
            finish(context, .failure(CancellationError()), reusable: false)
        }
    }

    private func finish(_ context: ChannelHandlerContext, _ result: Result<UpstreamHTTP.Response, any Error>, reusable: Bool) {
        guard let exchange = current else { return }
        current = nil
        exchange.timeout.cancel()
        if reusable {
            pool.release(context.channel, target: target, from: exchange.lease)
        } else {
            // Given back before the close frees its slot, which goes to the next waiting call.
            pool.giveBack(exchange.lease, target: target)
            context.close(promise: nil)
        }
        exchange.promise.completeWith(result)
    }
}
