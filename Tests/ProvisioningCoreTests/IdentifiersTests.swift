import Foundation
@testable import ProvisioningCore
import Testing

@Suite struct IdentifiersTests {
    @Test func randomIDsAre128BitsAsThirtyTwoLowercaseHexDigits() {
        let ids = (0..<64).map { _ in RandomID.hex128() }
        for id in ids {
            #expect(id.utf8.count == 32)
            #expect(id.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) })
        }
        // From the CSPRNG: 64 draws of 128 bits never repeat.
        #expect(Set(ids).count == ids.count)
        // Both halves vary (a second word left unwritten would show as a constant suffix).
        #expect(Set(ids.map { $0.suffix(16) }).count == ids.count)
    }

    /// The kernel's bytes are read `refillBytes` at a time: ids taken across several refills
    /// (from several threads at once) are all well formed and never repeat, so no refill hands out
    /// bytes twice or leaves part of the pool unfilled (zeroed bytes would show as repeated halves).
    @Test func idsAcrossManyRefillsFromManyTasksNeverRepeat() async {
        let perTask = 3 * RandomID.refillBytes / 16
        let ids = await withTaskGroup(of: [String].self) { group in
            for _ in 0..<4 { group.addTask { (0..<perTask).map { _ in RandomID.hex128() } } }
            return await group.reduce(into: []) { $0 += $1 }
        }
        #expect(ids.count == 4 * perTask)
        #expect(ids.allSatisfy { $0.utf8.count == 32 })
        #expect(Set(ids).count == ids.count)
        #expect(Set(ids.map { $0.prefix(16) }).count == ids.count)
        #expect(Set(ids.map { $0.suffix(16) }).count == ids.count)
    }

    @Test func provisioningIDsCarryTheirPrefix() {
        let id = ProvisioningID.generate().rawValue
        #expect(id.hasPrefix("prv_"))
        #expect(id.utf8.count == 36)
        #expect(id.dropFirst(4).utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) })
    }

    /// The first 12 digits are the creation millisecond, so ids sort by creation time as text
    /// (the audit indexes' order); the other 20 are random, so ids of one millisecond differ and
    /// do not sort by anything.
    @Test func provisioningIDsSortByTheirMillisecondAndDifferWithinIt() {
        // 200 distinct milliseconds in a shuffled order, each half a millisecond in (no rounding doubt).
        let base: UInt64 = 1_795_575_139_468
        let offsets = (0..<200).map { UInt64($0 * 7919 % 200) }
        let ids = offsets.map { ProvisioningID.generate(at: Date(timeIntervalSince1970: (Double(base + $0) + 0.5) / 1000)).rawValue }
        let byTime = zip(offsets, ids).sorted { $0.0 < $1.0 }.map(\.1)
        #expect(ids.sorted() == byTime)
        for (offset, id) in zip(offsets, ids) {
            #expect(UInt64(id.dropFirst(4).prefix(12), radix: 16) == base + offset)
        }
        let start = Date(timeIntervalSince1970: 1_795_575_139.4685)
        let sameMillisecond = (0..<500).map { _ in ProvisioningID.generate(at: start).rawValue }
        #expect(Set(sameMillisecond).count == sameMillisecond.count)
        #expect(Set(sameMillisecond.map { $0.suffix(20) }).count == sameMillisecond.count)
        #expect(Set(sameMillisecond.map { $0.dropFirst(4).prefix(12) }).count == 1)
    }
}
