import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// `server.max_connections` only protects the gateway if the process may open that many sockets:
/// with the common soft limit of 1024 open files, a flood would exhaust descriptors (and stop
/// `/healthz`, the store and upstream calls) long before the cap. At start-up the soft limit is
/// raised as far as the hard limit allows; when even that is too low, ops are told.
enum OpenFileLimit {
    /// Descriptors kept for the store, upstream pools, logs and the listener itself.
    static let reserve = 256

    /// The soft limit after raising it (nil where it cannot be read), and a warning when it is
    /// still below what `maxConnections` needs.
    static func raise(for maxConnections: Int) -> (limit: UInt64?, warning: String?) {
        #if canImport(Glibc)
        var limits = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limits) == 0 else { return (nil, nil) }
        let wanted = rlim_t(maxConnections + reserve)
        if limits.rlim_cur < wanted {
            var raised = limits
            raised.rlim_cur = min(wanted, limits.rlim_max)
            if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { limits = raised }
        }
        let warning = limits.rlim_cur < wanted
            ? "the open-file limit is \(limits.rlim_cur) (hard limit \(limits.rlim_max)), below server.max_connections (\(maxConnections)) "
                + "+ \(reserve): raise it (ulimit -n, LimitNOFILE=) or lower server.max_connections"
            : nil
        return (UInt64(limits.rlim_cur), warning)
        #else
        return (nil, nil)
        #endif
    }
}
