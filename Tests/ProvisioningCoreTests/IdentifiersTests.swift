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

    @Test func provisioningIDsCarryTheirPrefix() {
        let id = ProvisioningID.generate().rawValue
        #expect(id.hasPrefix("prv_"))
        #expect(id.utf8.count == 36)
    }
}
