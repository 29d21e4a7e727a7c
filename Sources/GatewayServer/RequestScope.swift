import Gateway
import Logging
import NIOCore

/// Values the middleware establishes for the rest of one request: the generated OpenAPI handlers
/// see no Hummingbird context, so these travel as task locals.
enum RequestScope {
    /// The authenticated caller: one task local for what authentication learnt (each `withValue`
    /// is a cost on every request).
    @TaskLocal static var caller: Caller?
    static var client: Client? { caller?.client }
    /// The caller's address, formatted only when a security event names it.
    static var remoteAddress: SocketAddress? { caller?.remoteAddress }
    @TaskLocal static var requestID: String = ""
    /// The gateway's logger with this request's `request_id`, `trace_id` and `span_id`: every line a
    /// request logs goes through it.
    @TaskLocal static var logger: Logger?
    /// The config generation the request runs on, from its arrival to its answer.
    @TaskLocal static var generation: ConfigGeneration?
    /// The access line's notes (`log.access`), filled in by the middleware below it.
    @TaskLocal static var access: AccessNote?
}

/// Who is calling, as `ClientAuthMiddleware` established it.
struct Caller: Sendable {
    let client: Client
    /// The SHA-256 of the API key the client presented (never the key), for `APIHandler.client()`'s
    /// check against a configuration reloaded while the request was being received.
    let keyDigest: [UInt8]
    let remoteAddress: SocketAddress?
}
