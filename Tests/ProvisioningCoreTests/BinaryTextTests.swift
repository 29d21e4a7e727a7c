import Foundation
import ProvisioningCore
import Testing

@Suite struct BinaryTextTests {
    @Test func hexRoundTripsAnyCase() throws {
        let bytes = Data([0x00, 0x0f, 0xa0, 0xff, 0x42])
        #expect(BinaryEncoding.hex.encode(bytes) == "000fa0ff42")
        #expect(BinaryEncoding.hex.decode("000FA0ff42") == bytes)
    }

    @Test(arguments: ["abc", "zz", "0g", "  "])
    func hexRefusesWhatIsNotHex(_ text: String) {
        #expect(BinaryEncoding.hex.decode(text) == nil)
    }

    @Test func base64URLHasNoPaddingAndRoundTrips() {
        let bytes = Data([0xfb, 0xff, 0xfe, 0x01])
        let text = BinaryEncoding.base64URL.encode(bytes)
        #expect(!text.contains("=") && !text.contains("+") && !text.contains("/"))
        #expect(BinaryEncoding.base64URL.decode(text) == bytes)
        #expect(BinaryEncoding.base64URL.decode(bytes.base64EncodedString()) == nil)
    }

    @Test func base64IsStrict() {
        #expect(BinaryEncoding.base64.decode("not base64!") == nil)
        #expect(BinaryEncoding.base64.decode("AAEC") == Data([0, 1, 2]))
    }
}
