import Hummingbird
import NIOCore

/// The router's context: Hummingbird's basics plus the connection's peer, so middleware can throttle
/// by source address. The generated OpenAPI handlers never see it (they register on any
/// `Router<Context>`), so everything they need still travels in `RequestScope`.
public struct GatewayRequestContext: RemoteAddressRequestContext {
    public var coreContext: CoreRequestContextStorage
    /// The TCP peer. Behind a proxy this is the proxy (no forwarding header is trusted).
    public let remoteAddress: SocketAddress?

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        remoteAddress = source.channel.remoteAddress
    }
}

/// Where a request came from, as the failed-authentication throttle counts it.
struct SourceAddress: Sendable, Equatable {
    /// The bucket's key: an IPv4 address, or an IPv6 address's /64 (one host usually holds a whole
    /// /64, so counting single IPv6 addresses would let it change address per request).
    let key: String
    /// The full address, for the audit log.
    let description: String

    init(_ address: SocketAddress?) {
        switch address {
        case .v4?:
            key = address?.ipAddress ?? "unknown"
            description = key
        case .v6(let v6)?:
            description = address?.ipAddress ?? "unknown"
            let bytes = withUnsafeBytes(of: v6.address.sin6_addr) { Array($0) }
            if bytes[0..<10].allSatisfy({ $0 == 0 }), bytes[10] == 0xff, bytes[11] == 0xff {
                // An IPv4 client of a dual-stack listener arrives as ::ffff:a.b.c.d: count it as IPv4.
                key = bytes[12...].map(String.init).joined(separator: ".")
            } else {
                key = stride(from: 0, to: 8, by: 2)
                    .map { String(UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]), radix: 16) }
                    .joined(separator: ":") + "::/64"
            }
        case .unixDomainSocket?:
            key = "unix"
            description = key
        case nil:
            key = "unknown"
            description = key
        }
    }
}
