import Foundation
@testable import PEMFiles
import ProvisioningCore
import Testing

/// What `PEMFiles` refuses before reading a byte (a device, a file past its size bound), each said
/// with the file's path and never anything in it; and `BoundedFile` itself, which reads a pipe
/// within the same bound.
@Suite struct PEMFilesTests {
    @Test func aDeviceIsRefusedBeforeItIsRead() {
        #expect(throws: PEMFiles.Failure.self) { try PEMFiles.certificates(at: URL(fileURLWithPath: "/dev/zero")) }
        do {
            _ = try PEMFiles.privateKey(at: URL(fileURLWithPath: "/dev/zero"))
            Issue.record("/dev/zero was read as a key")
        } catch {
            #expect(error.reason == "/dev/zero is not a file (a device or a directory)")
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
            #expect(error.reason == "\(file.path) is larger than a PEM file is here (at most \(PEMFiles.maxFileBytes) bytes, 1 MiB)")
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

    /// A pipe has no size to judge: it is read within the bound, and refused once past it.
    @Test func aPipeIsReadWithinTheBound() throws {
        let pipe = Pipe()
        let path = "/proc/self/fd/\(pipe.fileHandleForReading.fileDescriptor)"
        let writer = Thread { pipe.fileHandleForWriting.write(Data(repeating: 0x41, count: 200)); try? pipe.fileHandleForWriting.close() }
        writer.start()
        #expect(try BoundedFile.read(path, maxBytes: 200) == Data(repeating: 0x41, count: 200))
        let longer = Pipe()
        let longerPath = "/proc/self/fd/\(longer.fileHandleForReading.fileDescriptor)"
        let longWriter = Thread { longer.fileHandleForWriting.write(Data(repeating: 0x41, count: 4096)); try? longer.fileHandleForWriting.close() }
        longWriter.start()
        #expect(throws: BoundedFile.Failure.tooLarge(1001)) { try BoundedFile.read(longerPath, maxBytes: 1000) }
        #expect(throws: BoundedFile.Failure.notAFile) { try BoundedFile.read("/tmp", maxBytes: 1000) }
        #expect(throws: BoundedFile.Failure.unreadable("no such file")) { try BoundedFile.read("/nonexistent-\(UUID().uuidString)", maxBytes: 1000) }
    }
}
