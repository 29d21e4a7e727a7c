import Foundation

/// The database holds card references, audit events and sealed vault entries: only the gateway's
/// own user may read it. Directories the store creates are 0700 and the database file 0600,
/// whatever the process umask; SQLite gives its `-wal` and `-shm` files the database file's mode.
enum SQLiteFilePermissions {
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    static let directoryMode: mode_t = 0o700
    static let fileMode: mode_t = 0o600

    /// Creates the missing directories leading to `path` (0700 each; existing ones are left as
    /// they are: they may be shared, like /var/lib), creates the file 0600 if it does not exist,
    /// and tightens an existing file and its -wal/-shm companions to 0600.
    static func prepare(path: String) throws {
        let file = URL(fileURLWithPath: path)
        try createDirectories(file.deletingLastPathComponent())
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, fileMode)
        if fd >= 0 {
            // The umask may have taken bits away from the mode given to open(2); set it exactly.
            defer { close(fd) }
            guard fchmod(fd, fileMode) == 0 else { throw failure("cannot set the mode of", path) }
        } else if errno != EEXIST {
            throw failure("cannot create", path)
        }
        for candidate in [path, path + "-wal", path + "-shm"] {
            var info = stat()
            guard stat(candidate, &info) == 0 else {
                if errno == ENOENT, candidate != path { continue }
                throw failure("cannot inspect", candidate)
            }
            guard (info.st_mode & S_IFMT) == S_IFREG else { throw Failure(description: "\(candidate) is not a regular file") }
            if info.st_mode & 0o777 != fileMode, chmod(candidate, fileMode) != 0 {
                throw failure("cannot restrict to mode 0600", candidate)
            }
        }
    }

    static func createDirectories(_ directory: URL) throws {
        var missing: [String] = []
        var current = directory.standardizedFileURL
        var info = stat()
        while stat(current.path, &info) != 0 {
            guard errno == ENOENT else { throw failure("cannot inspect", current.path) }
            missing.append(current.path)
            let parent = current.deletingLastPathComponent()
            if parent.path == current.path { break }
            current = parent
        }
        for path in missing.reversed() {
            if mkdir(path, directoryMode) != 0 {
                // Another process may have made it meanwhile; then it is theirs to keep as it is.
                if errno == EEXIST { continue }
                throw failure("cannot create the directory", path)
            }
            guard chmod(path, directoryMode) == 0 else { throw failure("cannot set the mode of", path) }
        }
    }

    private static func failure(_ what: String, _ path: String) -> Failure {
        Failure(description: "\(what) \(path): \(String(cString: strerror(errno)))")
    }
}
