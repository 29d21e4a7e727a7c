import GatewayServer
import Testing

/// The allocator report start-up logs. `swift test` runs the build without jemalloc;
/// `.ci/run` also runs this suite with `--traits Jemalloc`, where the test process itself links
/// jemalloc through GatewayServer, as the gateway does.
@Suite struct ProcessAllocatorTests {
    #if Jemalloc
    @Test func jemallocServesTheProcesssMallocAndSaysWhichVersion() throws {
        #expect(ProcessAllocator.linksJemalloc)
        let version = try #require(ProcessAllocator.jemallocVersion)
        #expect(!version.isEmpty)
        #expect(ProcessAllocator.jemallocServesMalloc())
        #expect(ProcessAllocator.report() == ("jemalloc \(version)", false))
    }

    /// What the trait is for: the Swift runtime's own allocations (an array's storage here) go
    /// through jemalloc, so its counter for this thread moves by at least their size.
    @Test func swiftsOwnAllocationsGoThroughJemalloc() throws {
        let before = try #require(ProcessAllocator.threadAllocated())
        let bytes = [UInt8](repeating: 7, count: 1 << 20)
        let after = try #require(ProcessAllocator.threadAllocated())
        #expect(bytes.reduce(0) { $0 &+ Int($1) } == 7 << 20)
        #expect(after &- before >= UInt64(1 << 20), "jemalloc counted \(after &- before) bytes for a 1 MiB array")
    }
    #else
    @Test func withoutTheTraitTheReportSaysJemallocIsNotLinkedAndFindsNone() {
        #expect(!ProcessAllocator.linksJemalloc)
        #expect(ProcessAllocator.jemallocVersion == nil)
        #expect(ProcessAllocator.threadAllocated() == nil)
        #expect(!ProcessAllocator.jemallocServesMalloc())
        let report = ProcessAllocator.report()
        #expect(report.text.hasSuffix("this build does not link jemalloc"))
        #expect(!report.isWarning)
    }
    #endif
}
