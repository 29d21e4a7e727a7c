import Foundation
import Synchronization

/// Says on standard error, while a test process runs, when a task waited 2 s or more for a thread
/// of Swift's cooperative pool (two threads on two cores), and for how long: its threads were
/// blocked, or its queue was deep (the start of a run, hundreds of tests at once, keeps a task
/// waiting 2 to 4 s here). The tests' timeouts then fire for reasons no test's code shows
/// (loopback connects "not made in time", 9 s for a test that takes 50 ms). A thread of its own
/// hands the pool a tiny task every 250 ms and notes how long it waited to run. `scripts/stall-watch.py` says whether the whole machine or its disk stalled
/// meanwhile; this says whether the pool did. Started once per test process, with the tests'
/// directory (`TestDirectories.root`), which nearly every test touches.
enum PoolWatchdog {
    /// When the pool last ran the watchdog's task (uptime, ns).
    private final class Beat: Sendable {
        let ran = Atomic<UInt64>(0)
    }

    static let started: Void = {
        let beat = Beat()
        Thread.detachNewThread {
            var reported = false
            var stalledSince: UInt64?
            while true {
                let posted = DispatchTime.now().uptimeNanoseconds
                Task.detached { beat.ran.store(DispatchTime.now().uptimeNanoseconds, ordering: .releasing) }
                Thread.sleep(forTimeInterval: 0.25)
                while beat.ran.load(ordering: .acquiring) < posted {
                    let waited = DispatchTime.now().uptimeNanoseconds - posted
                    if waited >= 2_000_000_000, !reported {
                        reported = true
                        stalledSince = posted
                        FileHandle.standardError.write(Data("pool-watchdog: a task has waited 2 s for a thread of the cooperative pool (pid \(getpid()))\n".utf8))
                    }
                    Thread.sleep(forTimeInterval: 0.05)
                }
                if reported, let since = stalledSince {
                    let seconds = Double(beat.ran.load(ordering: .acquiring) - since) / 1e9
                    FileHandle.standardError.write(Data(String(format: "pool-watchdog: the waiting task ran after %.1f s\n", seconds).utf8))
                    reported = false
                    stalledSince = nil
                }
            }
        }
    }()
}
