import Foundation
import Subprocess
import Synchronization
#if canImport(System)
import System
#else
import SystemPackage
#endif

/// Child processes for tests, through swift-subprocess: awaited, never blocking a thread of the
/// concurrency pool, always reaped, and never waited for without a limit. A child that outlives
/// its limit is killed and the test fails naming it, instead of hanging the whole run.
public enum Command {
    public struct Result: Sendable {
        /// The exit code, or the negated signal number when a signal ended it.
        public let status: Int32
        public let stdout: String
        public let stderr: String
    }

    public struct TimedOut: Error, CustomStringConvertible {
        public let description: String
    }

    static let setpriv = ["/usr/bin/setpriv", "/bin/setpriv"].first { FileManager.default.isExecutableFile(atPath: $0) } ?? "/usr/bin/setpriv"

    /// How long a short-lived child (initdb, a CLI subcommand) may take.
    public static let defaultLimit: Duration = .seconds(120)

    public static func run(
        _ executable: String, _ arguments: [String], workingDirectory: String? = nil, asUser user: String? = nil,
        environment: [String: String] = [:], standardInput: String? = nil, limit: Duration = defaultLimit
    ) async throws -> Result {
        // Not swift-subprocess's userID/groupID: its fork path calls glibc's setgid() in the
        // child of a multithreaded parent, which can wait forever on the parent's threads (seen
        // here: a CI run hung 90 minutes in __nptl_setxid). setpriv switches user after exec.
        let what = "\(URL(fileURLWithPath: executable).lastPathComponent) \(arguments.first ?? "")"
        var executable = executable
        var arguments = arguments
        if let user {
            arguments = ["--reuid=\(user)", "--regid=\(user)", "--clear-groups", "--", executable] + arguments
            executable = setpriv
        }
        let pid = ChildPID()
        let (executablePath, argumentList) = (executable, arguments)
        let variables = Environment.inherit.updating(
            Dictionary(uniqueKeysWithValues: environment.map { (Environment.Key(stringLiteral: $0.key), Optional($0.value)) }))
        return try await withLimit(limit, what, onExpiry: { pid.kill(SIGKILL) }) {
            if let standardInput {
                // A child that exits without reading its input (a refused command) closes the
                // pipe: the write then fails with EPIPE instead of a SIGPIPE ending the test run.
                signal(SIGPIPE, SIG_IGN)
                return try await collected(executablePath, argumentList, variables, workingDirectory, input: .string(standardInput), pid: pid)
            }
            return try await collected(executablePath, argumentList, variables, workingDirectory, input: .none, pid: pid)
        }
    }

    /// One child with `input` on its standard input, its output collected.
    private static func collected<Input: InputProtocol>(
        _ executable: String, _ arguments: [String], _ environment: Environment, _ workingDirectory: String?, input: Input, pid: ChildPID
    ) async throws -> Result {
        let result = try await Subprocess.run(
            .path(FilePath(executable)), arguments: Arguments(arguments), environment: environment,
            workingDirectory: workingDirectory.map { FilePath($0) },
            input: input, output: .sequence, error: .sequence
        ) { execution in
            pid.set(execution.processIdentifier.value)
            async let out = collect(execution.standardOutput)
            async let err = collect(execution.standardError)
            return try await (out, err)
        }
        return Result(status: code(result.terminationStatus), stdout: result.closureResult.0, stderr: result.closureResult.1)
    }

    /// A long-running child whose first stdout line `body` reads; `body` may signal it. When
    /// `body` returns (or throws) the child is sent SIGTERM if it still runs, and SIGKILL if it has
    /// not exited `stopLimit` later.
    public struct Running: Sendable {
        public let firstLine: String
        public let signal: @Sendable (Int32) -> Void
        public let pid: pid_t
    }

    public static func withRunning<T: Sendable>(
        _ executable: String, _ arguments: [String], workingDirectory: String? = nil,
        limit: Duration = .seconds(300), stopLimit: Duration = .seconds(30), errorLog: String? = nil,
        onStart: @escaping @Sendable (pid_t) -> Void = { _ in },
        _ body: @escaping @Sendable (Running) async throws -> T
    ) async throws -> (value: T, status: Int32) {
        let pid = ChildPID()
        let name = URL(fileURLWithPath: executable).lastPathComponent
        let (executablePath, argumentList) = (executable, arguments)
        return try await withLimit(limit, name, onExpiry: { pid.kill(SIGKILL) }) {
            guard let errorLog else {
                return try await running(executablePath, argumentList, workingDirectory, error: .discarded, pid: pid,
                                         stopLimit: stopLimit, onStart: onStart, body)
            }
            // The child's standard error (its log) kept in a file, for a test to read or to show
            // when it fails; the descriptor is the child's alone once it has started.
            let file = try FileDescriptor.open(FilePath(errorLog), .writeOnly, options: [.create, .truncate],
                                               permissions: [.ownerReadWrite])
            return try await running(executablePath, argumentList, workingDirectory,
                                     error: .fileDescriptor(file, closeAfterSpawningProcess: true), pid: pid,
                                     stopLimit: stopLimit, onStart: onStart, body)
        }
    }

    /// The last `lines` lines of a child's log kept with `errorLog`, for a failing test's message.
    public static func tail(ofLog path: String, lines: Int = 40) -> String {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return "(no log at \(path))" }
        return text.split(separator: "\n", omittingEmptySubsequences: false).suffix(lines).joined(separator: "\n")
    }

    private static func running<T: Sendable, ErrorOutput: ErrorOutputProtocol>(
        _ executable: String, _ arguments: [String], _ workingDirectory: String?, error: ErrorOutput, pid: ChildPID,
        stopLimit: Duration, onStart: @escaping @Sendable (pid_t) -> Void,
        _ body: @escaping @Sendable (Running) async throws -> T
    ) async throws -> (value: T, status: Int32) {
        let result = try await Subprocess.run(
            .path(FilePath(executable)), arguments: Arguments(arguments),
            workingDirectory: workingDirectory.map { FilePath($0) },
            input: .none, output: .sequence, error: error
        ) { execution in
            let id = execution.processIdentifier.value
            pid.set(id)
            onStart(id)
            var lines = execution.standardOutput.strings().makeAsyncIterator()
            let outcome: Swift.Result<T, any Error>
            do {
                let first = try await lines.next() ?? ""
                outcome = .success(try await body(Running(firstLine: first, signal: { kill(id, $0) }, pid: id)))
            } catch {
                outcome = .failure(error)
            }
            kill(id, SIGTERM)
            // A child that ignores SIGTERM is killed; its output is drained either way.
            let killer = Task {
                try await Task.sleep(for: stopLimit)
                kill(id, SIGKILL)
            }
            while (try? await lines.next()) ?? nil != nil {}
            killer.cancel()
            return try outcome.get()
        }
        return (result.closureResult, code(result.terminationStatus))
    }

    /// Runs `operation`, or gives up after `limit`: `onExpiry` runs (to kill a child) and the
    /// caller gets `TimedOut`, even if the operation itself never returns.
    public static func withLimit<T: Sendable>(
        _ limit: Duration, _ what: String, onExpiry: @escaping @Sendable () -> Void,
        _ operation: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        let settled = Once()
        return try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            let timer = Task {
                try await Task.sleep(for: limit)
                guard settled.claim() else { return }
                onExpiry()
                continuation.resume(throwing: TimedOut(description: "\(what) did not finish within \(limit)"))
            }
            Task {
                let result = await Swift.Result { try await operation() }
                timer.cancel()
                guard settled.claim() else { return }
                continuation.resume(with: result)
            }
        }
    }

    static func collect(_ sequence: SubprocessOutputSequence) async throws -> String {
        var lines: [String] = []
        for try await line in sequence.strings() { lines.append(line) }
        return lines.joined(separator: "\n")
    }

    static func code(_ status: TerminationStatus) -> Int32 {
        switch status {
        case .exited(let code): code
        case .signaled(let signal): -signal
        }
    }
}

/// A child's pid, once known, for a watchdog to kill.
final class ChildPID: Sendable {
    private let pid = Mutex<pid_t?>(nil)
    func set(_ value: pid_t) { pid.withLock { $0 = value } }
    func kill(_ signal: Int32) { if let value = pid.withLock({ $0 }) { _ = Glibc.kill(value, signal) } }
}

/// True for the first caller only.
final class Once: Sendable {
    private let claimed = Mutex(false)
    func claim() -> Bool { claimed.withLock { let first = !$0; $0 = true; return first } }
}

extension Swift.Result where Failure == any Error {
    init(catching body: () async throws -> Success) async {
        do { self = .success(try await body()) } catch { self = .failure(error) }
    }
}
