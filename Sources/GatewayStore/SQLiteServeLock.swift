import Foundation
import ProvisioningCore

/// One `serve` per SQLite store. Two gateways on one file would each migrate it at start (a newer
/// binary's schema under an older one still serving), and each keeps its own in-memory view of
/// what the store holds (idempotency waits, the group commit's writer): the second is refused
/// before it opens the database. The CLI's commands take no lock: they run beside a serving
/// gateway by design.
///
/// The lock is an exclusive `flock(2)` on a file beside the database (`<path>.serve-lock`, 0600),
/// held for as long as this value lives and released by the kernel when the process ends, however
/// it ends (a SIGKILL leaves no stale lock to clean up). It is not taken on the database file itself:
/// SQLite's own locks are POSIX record locks, which the process loses on its first `close(2)` of
/// any descriptor of that file, ours included.
public final class SQLiteServeLock: Sendable {
    public let path: String
    private let descriptor: Int32

    /// The lock file of the store at `databasePath`.
    public static func lockPath(forDatabase databasePath: String) -> String { databasePath + ".serve-lock" }

    /// Takes the lock or throws a `StoreError` saying which process holds it (its pid, as that
    /// process wrote it into the file). Creates the file's directories as the store does (0700).
    public init(databasePath: String) throws {
        // By the file's real path: a second name for the same database (a symbolic link to it or
        // to its directory) must meet the same lock (review).
        let path = Self.lockPath(forDatabase: URL(fileURLWithPath: databasePath).resolvingSymlinksInPath().path)
        self.path = path
        let store = "sqlite \(databasePath)"
        do {
            try SQLiteFilePermissions.createDirectories(URL(fileURLWithPath: path).deletingLastPathComponent())
        } catch {
            throw StoreError(store: store, reason: "\(error)")
        }
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, SQLiteFilePermissions.fileMode)
        guard fd >= 0 else {
            throw StoreError(store: store, reason: "cannot open its lock file \(path): \(String(cString: strerror(errno)))")
        }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            let reason = errno
            let holder = Self.readHolder(fd)
            close(fd)
            guard reason == EWOULDBLOCK else {
                throw StoreError(store: store, reason: "cannot lock \(path): \(String(cString: strerror(reason)))")
            }
            throw StoreError(
                store: store,
                reason: "another gateway serves this store\(holder.map { " (pid \($0))" } ?? "") and holds \(path); "
                    + "one `serve` per SQLite file: stop it first, or use PostgreSQL for several instances")
        }
        // Ours now: say who holds it, for the next one's message. A failure here costs only that.
        _ = fchmod(fd, SQLiteFilePermissions.fileMode)
        if ftruncate(fd, 0) == 0 {
            let text = "\(getpid())\n"
            _ = text.withCString { pwrite(fd, $0, strlen($0), 0) }
        }
        descriptor = fd
    }

    deinit {
        // Closing the descriptor releases the lock.
        close(descriptor)
    }

    /// The pid the holder wrote, if it reads as one.
    private static func readHolder(_ fd: Int32) -> Int? {
        var bytes = [UInt8](repeating: 0, count: 16)
        let count = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
        guard count > 0 else { return nil }
        let text = String(decoding: bytes[..<count], as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        return Int(text).flatMap { $0 > 0 ? $0 : nil }
    }
}
