#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// This process on its host, as the store's records name it: `<host name> pid <pid>`. A reload
/// applies to one instance, and on a store several share, its events must say which have taken
/// a revocation (the multi-instance audit could not tell from the events); an archive run's lease
/// names the process that holds it. `gethostname`, not Foundation's `hostName`, which may wait on
/// name resolution.
enum GatewayInstance {
    static let name: String = {
        var name = [CChar](repeating: 0, count: 256)
        let host = gethostname(&name, name.count - 1) == 0 ? String(cString: name) : "unknown-host"
        return "\(host) pid \(getpid())"
    }()
}
