import Foundation
@testable import GatewayTestSupport
import Testing

/// The tests' own files go under one directory per test process (`TestDirectories`); a process
/// that could not remove its own (killed, crashed) has it removed by the next one.
struct TestDirectoriesTests {
    @Test func aGoneProcessesDirectoryIsRemovedAndALiveOnesKept() throws {
        let base = TestDirectories.unique("sweep")
        let finished = Process()
        finished.executableURL = URL(fileURLWithPath: "/bin/true")
        try finished.run()
        finished.waitUntilExit()
        let names = [
            "gateway-tests-\(finished.processIdentifier)",  // gone
            "gateway-tests-1",  // init: running
            "gateway-tests-\(getpid())",  // this process
            "gateway-tests-notapid",
            "other-\(finished.processIdentifier)",
        ]
        for name in names {
            try FileManager.default.createDirectory(at: base.appendingPathComponent("\(name)/store"), withIntermediateDirectories: true)
        }
        TestDirectories.removeAbandoned(in: base)
        let left = Set(try FileManager.default.contentsOfDirectory(atPath: base.path))
        #expect(left == Set(names.dropFirst()))
    }

    @Test func pathsAreUnderThisProcesssDirectoryAndDistinct() {
        let one = TestDirectories.unique("store"), two = TestDirectories.unique("store")
        #expect(one != two)
        #expect(one.deletingLastPathComponent().path == TestDirectories.root.path)
        #expect(TestDirectories.root.lastPathComponent == "gateway-tests-\(getpid())")
    }
}
