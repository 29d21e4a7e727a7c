import Foundation
import GatewayTestSupport
import Testing

/// Two `serve` processes on one SQLite file: the second stops before it opens (or migrates) the
/// database, saying which process serves it; once that one has stopped, the file is free again.
@Suite struct ServeLockCommandLineTests {
    @Test func aSecondServeOnTheSameSQLiteFileIsRefusedAndTheFileIsFreeOnceTheFirstStops() async throws {
        let (directory, config, _) = try GracefulShutdownTests.sandbox("serve-lock")
        let arguments = ["--config", config.path, "--port", "0"]
        let executable = try CommandLineTests.executable().path

        let (second, firstStatus) = try await Command.withRunning(executable, arguments, workingDirectory: CommandLineTests.packageRoot.path) { running in
            let base = try #require(running.firstLine.split(separator: " ").first { $0.hasPrefix("http://") }.map(String.init))
            #expect(try await GracefulShutdownTests.send(.GET, "\(base)/readyz").status == 200)
            // Refused at once; without the lock it would serve on a port of its own until the limit.
            let second = try await Command.run(executable, arguments, workingDirectory: CommandLineTests.packageRoot.path, limit: .seconds(30))
            // The first still serves, untouched.
            #expect(try await GracefulShutdownTests.send(.GET, "\(base)/readyz").status == 200)
            return (second, running.pid)
        }
        #expect(firstStatus == 0)
        let (refused, firstPID) = second
        #expect(refused.status != 0)
        #expect(refused.stderr.contains("another gateway serves this store (pid \(firstPID))"), "\(refused.stderr)")
        #expect(refused.stderr.contains(directory.appendingPathComponent("gateway.sqlite").path), "\(refused.stderr)")

        // Stopped, the first leaves the file free: the next start serves.
        let (ready, status) = try await Command.withRunning(executable, arguments, workingDirectory: CommandLineTests.packageRoot.path) { running in
            let base = try #require(running.firstLine.split(separator: " ").first { $0.hasPrefix("http://") }.map(String.init))
            return try await GracefulShutdownTests.send(.GET, "\(base)/readyz").status
        }
        #expect(ready == 200)
        #expect(status == 0)
    }
}
