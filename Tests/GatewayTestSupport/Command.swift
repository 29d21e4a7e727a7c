import Foundation
import Subprocess
#if canImport(System)
import System
#else
import SystemPackage
#endif

/// Child processes for tests, through swift-subprocess: awaited, never blocking a thread of the
/// concurrency pool, and always reaped.
public enum Command {
    public struct Result: Sendable {
        /// The exit code, or the negated signal number when a signal ended it.
        public let status: Int32
        public let stdout: String
        public let stderr: String
    }

    public static func run(
        _ executable: String, _ arguments: [String], workingDirectory: String? = nil, asUser user: String? = nil
    ) async throws -> Result {
        var options = PlatformOptions()
        if let user, let entry = getpwnam(user) {
            options.userID = entry.pointee.pw_uid
            options.groupID = entry.pointee.pw_gid
        }
        let result = try await Subprocess.run(
            .path(FilePath(executable)), arguments: Arguments(arguments),
            workingDirectory: workingDirectory.map { FilePath($0) }, platformOptions: options,
            output: .string(limit: 1 << 20), error: .string(limit: 1 << 20))
        return Result(status: code(result.terminationStatus), stdout: result.standardOutput ?? "", stderr: result.standardError ?? "")
    }

    /// A long-running child whose first stdout line `body` reads; `body` may signal it. When
    /// `body` returns the child is sent SIGTERM (if it still runs) and awaited.
    public struct Running: Sendable {
        public let firstLine: String
        public let signal: @Sendable (Int32) -> Void
    }

    public static func withRunning<T: Sendable>(
        _ executable: String, _ arguments: [String], workingDirectory: String? = nil,
        _ body: @escaping @Sendable (Running) async throws -> T
    ) async throws -> (value: T, status: Int32) {
        let result = try await Subprocess.run(
            .path(FilePath(executable)), arguments: Arguments(arguments),
            workingDirectory: workingDirectory.map { FilePath($0) },
            input: .none, output: .sequence, error: .discarded
        ) { execution in
            var lines = execution.standardOutput.strings().makeAsyncIterator()
            let first = try await lines.next() ?? ""
            let pid = execution.processIdentifier.value
            let value = try await body(Running(firstLine: first, signal: { kill(pid, $0) }))
            kill(pid, SIGTERM)
            while try await lines.next() != nil {}
            return value
        }
        return (result.closureResult, code(result.terminationStatus))
    }

    static func code(_ status: TerminationStatus) -> Int32 {
        switch status {
        case .exited(let code): code
        case .signaled(let signal): -signal
        }
    }
}
