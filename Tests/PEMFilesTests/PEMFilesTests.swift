import Foundation
@testable import PEMFiles
import Testing

/// What `PEMFiles` refuses before reading a byte: a file that is no regular file, or one past its
/// size bound, each said with the file's path and never anything in it.
@Suite struct PEMFilesTests {
    @Test func aDeviceIsRefusedBeforeItIsRead() {
        #expect(throws: PEMFiles.Failure.self) { try PEMFiles.certificates(at: URL(fileURLWithPath: "/dev/zero")) }
        do {
            _ = try PEMFiles.privateKey(at: URL(fileURLWithPath: "/dev/zero"))
            Issue.record("/dev/zero was read as a key")
        } catch {
            #expect(error.reason == "/dev/zero is not a regular file")
        }
    }

    @Test func aFilePastTheBoundIsRefusedBeforeItIsRead() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("pem-bound-\(UUID().uuidString).pem")
        defer { try? FileManager.default.removeItem(at: file) }
        // A sparse file one byte past the bound: its size is what is judged.
        #expect(FileManager.default.createFile(atPath: file.path, contents: nil))
        let handle = try FileHandle(forWritingTo: file)
        try handle.truncate(atOffset: UInt64(PEMFiles.maxFileBytes + 1))
        try handle.close()
        do {
            _ = try PEMFiles.certificates(at: file)
            Issue.record("a file past the bound was read")
        } catch {
            #expect(error.reason == "\(file.path) is \(PEMFiles.maxFileBytes + 1) bytes; a PEM file is at most \(PEMFiles.maxFileBytes) bytes (1 MiB)")
        }
        // At the bound it is read, and judged by what it holds.
        let atBound = try FileHandle(forWritingTo: file)
        try atBound.truncate(atOffset: UInt64(PEMFiles.maxFileBytes))
        try atBound.close()
        do {
            _ = try PEMFiles.certificates(at: file)
            Issue.record("zeros were read as certificates")
        } catch {
            #expect(error.reason == "\(file.path) holds no PEM certificate")
        }
    }
}
