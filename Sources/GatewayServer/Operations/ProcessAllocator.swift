#if Jemalloc
import CJemalloc
#endif
#if canImport(Glibc)
import Glibc
#endif

/// The allocator behind this process's `malloc`, which every Swift object, string, array and JSON
/// buffer goes through. The C library's malloc by default; jemalloc when the package is built with
/// the trait `Jemalloc` (`swift build -c release --traits Jemalloc`, with Debian's libjemalloc-dev),
/// which costs a provisioning about 5 % less CPU under load (README, "A production build").
/// Start-up logs which one runs, and warns when a build that links jemalloc finds `malloc` served
/// by another (one put in front of it with `LD_PRELOAD`, say).
public enum ProcessAllocator {
    /// Whether this build links jemalloc (the trait `Jemalloc`).
    public static var linksJemalloc: Bool {
        #if Jemalloc
        true
        #else
        false
        #endif
    }

    /// What start-up logs: `jemalloc <version>` when jemalloc serves `malloc`, else what does as far
    /// as this build can tell; a warning when a build that links jemalloc finds another allocator.
    public static func report() -> (text: String, isWarning: Bool) {
        guard linksJemalloc else {
            return ("the malloc the process loaded (the C library's, unless preloaded); this build does not link jemalloc", false)
        }
        let version = jemallocVersion ?? "(version unreadable)"
        return jemallocServesMalloc()
            ? ("jemalloc \(version)", false)
            : ("another allocator, not the jemalloc \(version) this build links, serves malloc", true)
    }

    /// jemalloc's version, read through `mallctl`; nil in a build without it.
    public static var jemallocVersion: String? {
        #if Jemalloc
        var version: UnsafePointer<CChar>?
        var size = MemoryLayout<UnsafePointer<CChar>?>.size
        guard mallctl("version", &version, &size, nil, 0) == 0, let version else { return nil }
        return String(cString: version)
        #else
        return nil
        #endif
    }

    /// The bytes the calling thread has allocated through jemalloc so far (its `thread.allocated`
    /// counter); nil in a build without jemalloc or where jemalloc keeps no statistics.
    public static func threadAllocated() -> UInt64? {
        #if Jemalloc
        var bytes: UInt64 = 0
        var size = MemoryLayout<UInt64>.size
        guard mallctl("thread.allocated", &bytes, &size, nil, 0) == 0 else { return nil }
        return bytes
        #else
        return nil
        #endif
    }

    /// Whether `malloc` as the rest of the process calls it is jemalloc's. Linking jemalloc is not
    /// enough: which `malloc` a process gets is settled when it is loaded. So this asks the dynamic
    /// linker for the process's `malloc` and `free` (as the Swift runtime and Foundation reach
    /// them), allocates 64 KiB through them and checks jemalloc's counter for this thread moved.
    public static func jemallocServesMalloc() -> Bool {
        #if canImport(Glibc)
        guard let before = threadAllocated(),
              let mallocSymbol = dlsym(nil, "malloc"), let freeSymbol = dlsym(nil, "free")
        else { return false }
        typealias Malloc = @convention(c) (Int) -> UnsafeMutableRawPointer?
        typealias Free = @convention(c) (UnsafeMutableRawPointer?) -> Void
        let probe = 1 << 16
        guard let block = unsafeBitCast(mallocSymbol, to: Malloc.self)(probe) else { return false }
        block.storeBytes(of: 1, as: UInt8.self)
        unsafeBitCast(freeSymbol, to: Free.self)(block)
        guard let after = threadAllocated() else { return false }
        return after &- before >= UInt64(probe)
        #else
        return false
        #endif
    }
}
