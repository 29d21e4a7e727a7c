import ByteText
import Foundation
import Testing

@Suite struct ByteTextTests {
    @Test func hexRoundTripsAnyCase() {
        let bytes = Data([0x00, 0x0f, 0xa0, 0xff, 0x42])
        #expect(bytes.lowercaseHex == "000fa0ff42")
        #expect(Data(hex: "000FA0ff42") == bytes)
        #expect(Data(hex: "") == Data())
    }

    @Test func everyByteValueIsTwoLowercaseHexDigits() {
        let bytes = Data((0...255).map(UInt8.init))
        #expect(bytes.lowercaseHex == bytes.map { String(format: "%02x", $0) }.joined())
        #expect(Data().lowercaseHex == "")
        // A slice that does not start at index 0.
        #expect(bytes[250...].lowercaseHex == "fafbfcfdfeff")
    }

    @Test(arguments: ["abc", "zz", "0g", "  ", "+f", "-1"])
    func hexRefusesWhatIsNotHex(_ text: String) {
        #expect(Data(hex: text) == nil)
    }

    @Test func base64URLHasNoPaddingAndRoundTrips() {
        let bytes = Data([0xfb, 0xff, 0xfe, 0x01])
        let text = bytes.base64URLEncodedString()
        #expect(text == "-__-AQ")
        #expect(Data(base64URLEncoded: text) == bytes)
    }

    @Test(arguments: ["+//+AQ==", "-__-AQ==", "+//+AQ"])
    func base64URLRefusesTheStandardAlphabetAndPadding(_ text: String) {
        #expect(Data(base64URLEncoded: text) == nil)
    }

    @Test(arguments: ["+//+AQ==", "-__-AQ", "-__-AQ==", "+//+AQ", "+//+AQ===="])
    func lenientBase64ReadsEitherAlphabetAndAnyPadding(_ text: String) {
        #expect(Data(lenientBase64: text) == Data([0xfb, 0xff, 0xfe, 0x01]))
    }

    @Test(arguments: ["", "====", "A", "AAAAA", "not base64!"])
    func lenientBase64RefusesWhatIsNotBase64(_ text: String) {
        #expect(Data(lenientBase64: text) == nil)
    }

    /// Every length (so every amount of padding to restore), both alphabets, padding kept or
    /// dropped: the bytes come back as they were.
    @Test func lenientBase64ReadsBackEveryLengthInEitherAlphabet() {
        var generator = SystemRandomNumberGenerator()
        for length in 1...300 {
            let bytes = Data((0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) })
            let standard = bytes.base64EncodedString()
            let url = bytes.base64URLEncodedString()
            for text in [standard, String(standard.prefix { $0 != "=" }), url, url + "=="] {
                #expect(Data(lenientBase64: text) == bytes, "\(length) \(text)")
            }
            #expect(Data(base64URLEncoded: url) == bytes, "\(length)")
        }
    }
}

