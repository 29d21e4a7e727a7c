import Foundation

/// Host names and addresses the gateway treats as this machine: traffic to them never leaves it,
/// so it may go without TLS.
public enum NetworkHost {
    public static func isLoopback(_ host: String) -> Bool {
        var host = host.lowercased()
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        // Only names that never leave the machine: `*.localhost` may be resolved through DNS.
        if host == "localhost" || host == "::1" { return true }
        if host.contains(":") { return isIPv6Loopback(host) }
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts[0] == "127" && parts.allSatisfy { UInt8($0) != nil }
    }

    /// `::1` in any of its spellings (`0:0:0:0:0:0:0:1`, `0::1`), and an IPv4 loopback address
    /// mapped into IPv6 (`::ffff:127.0.0.1`), as the C library reads them; a zone (`%lo`) or
    /// anything else is not one.
    static func isIPv6Loopback(_ text: String) -> Bool {
        guard text.utf8.count <= 45, !text.contains("%") else { return false }
        var address = in6_addr()
        guard inet_pton(AF_INET6, text, &address) == 1 else { return false }
        let bytes = withUnsafeBytes(of: &address) { Array($0) }
        if bytes == Array(repeating: 0, count: 15) + [1] { return true }
        return bytes.prefix(10).allSatisfy { $0 == 0 } && bytes[10] == 0xFF && bytes[11] == 0xFF && bytes[12] == 127
    }
}

extension GatewayConfig {
    /// A path from the file, relative to the file's directory (or the working directory).
    public func resolvePath(_ path: String) -> URL {
        if path.hasPrefix("/") { return URL(fileURLWithPath: path) }
        let base = baseDirectory ?? URL(fileURLWithPath: FileManager.default.currentDirectoryPath)
        return base.appendingPathComponent(path)
    }
}
