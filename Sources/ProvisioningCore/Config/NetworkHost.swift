import Foundation

/// Host names and addresses the gateway treats as this machine: traffic to them never leaves it,
/// so it may go without TLS.
public enum NetworkHost {
    public static func isLoopback(_ host: String) -> Bool {
        var host = host.lowercased()
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        // Only names that never leave the machine: `*.localhost` may be resolved through DNS.
        if host == "localhost" || host == "::1" { return true }
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts[0] == "127" && parts.allSatisfy { UInt8($0) != nil }
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
