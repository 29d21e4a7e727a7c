import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Where the tests put their files: one directory per test process, `gateway-tests-<pid>` under
/// the system's temporary directory, removed with everything in it when the process exits. A
/// test names its own paths under `root` (a store's file, a config to reload, a PKI), each with
/// a UUID of its own, and never has to remember to delete them: a suite of hundreds of stores
/// left hundreds of directories in `/tmp` on every run before.
///
/// A process that does not exit (killed, crashed) cannot remove its directory; the next test
/// process removes every `gateway-tests-<pid>` whose process is gone.
public enum TestDirectories {
    static let prefix = "gateway-tests-"

    /// This process's directory, made on first use.
    public static let root: URL = {
        PoolWatchdog.started
        let base = FileManager.default.temporaryDirectory
        removeAbandoned(in: base)
        let root = base.appendingPathComponent("\(prefix)\(getpid())")
        // A directory of an earlier process that had this pid: not this process's files.
        try? FileManager.default.removeItem(at: root)
        do {
            try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        } catch {
            fatalError("cannot make the tests' directory \(root.path): \(error)")
        }
        atexit { TestDirectories.removeRoot() }
        return root
    }()

    /// A path under `root` no other test uses: `name-<UUID>`, not yet made.
    public static func unique(_ name: String) -> URL {
        root.appendingPathComponent("\(name)-\(UUID().uuidString)")
    }

    private static func removeRoot() {
        try? FileManager.default.removeItem(at: root)
    }

    /// The directories of test processes that are no longer running (`kill(pid, 0)` answers
    /// ESRCH). A pid taken since by another process keeps its directory until that one ends.
    static func removeAbandoned(in base: URL) {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: base.path) else { return }
        for name in names where name.hasPrefix(prefix) {
            guard let pid = pid_t(name.dropFirst(prefix.count)), pid > 0, pid != getpid() else { continue }
            if kill(pid, 0) == -1 && errno == ESRCH {
                try? FileManager.default.removeItem(at: base.appendingPathComponent(name))
            }
        }
    }
}
