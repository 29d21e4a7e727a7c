import Gateway
import NIOCore

/// Values the middleware establishes for the rest of one request: the generated OpenAPI handlers
/// see no Hummingbird context, so these travel as task locals.
enum RequestScope {
    @TaskLocal static var client: Client?
    @TaskLocal static var requestID: String = ""
    /// The caller's address, formatted only when a security event names it.
    @TaskLocal static var remoteAddress: SocketAddress?
}
