import Foundation

/// Reading a whole file the gateway is given (its config, a CSV to import, PEM and DER files),
/// never more than a bound: a device (`/dev/zero`), a directory or a runaway file named by mistake
/// had been read until memory ran out (the input audit). What is read is the open file itself: a
/// regular file is measured by `fstat` on the descriptor read from, and at most `maxBytes + 1`
/// bytes are read whatever it claims, so a file that grows meanwhile is refused too. A pipe
/// (`--config <(...)`) is read within the same bound; a device or a directory is refused unread.
public enum BoundedFile {
    public enum Failure: Error, Sendable, Equatable, CustomStringConvertible {
        /// It cannot be opened or read: `no such file`, `permission denied`, or the system's reason.
        case unreadable(String)
        /// A device or a directory.
        case notAFile
        /// Over `maxBytes`: its size when a regular file says so, else `maxBytes + 1`.
        case tooLarge(Int)

        public var description: String {
            switch self {
            case .unreadable(let reason): reason
            case .notAFile: "not a file (a device or a directory)"
            case .tooLarge(let size): "\(size) bytes, more than it may be"
            }
        }
    }

    /// The bytes of the file at `path`, at most `maxBytes` of them.
    public static func read(_ path: String, maxBytes: Int) throws(Failure) -> Data {
        // Non-blocking only for the open: a FIFO without a writer would otherwise hold it for ever.
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard descriptor >= 0 else { throw .unreadable(reason(errno)) }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { throw .unreadable(reason(errno)) }
        switch info.st_mode & S_IFMT {
        case S_IFREG:
            guard Int(info.st_size) <= maxBytes else { throw .tooLarge(Int(info.st_size)) }
        case S_IFIFO, S_IFSOCK:
            break
        default:
            throw .notAFile
        }
        _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) & ~O_NONBLOCK)
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let wanted = min(buffer.count, maxBytes + 1 - data.count)
            let count = buffer.withUnsafeMutableBytes { Foundation.read(descriptor, $0.baseAddress, wanted) }
            if count < 0 {
                if errno == EINTR { continue }
                throw .unreadable(reason(errno))
            }
            if count == 0 { return data }
            data.append(contentsOf: buffer[0..<count])
            if data.count > maxBytes { throw .tooLarge(data.count) }
        }
    }

    static func reason(_ code: Int32) -> String {
        switch code {
        case ENOENT: "no such file"
        case EACCES, EPERM: "permission denied"
        default: String(cString: strerror(code)).lowercased()
        }
    }
}
