import Foundation
import ProvisioningCore
import Testing

/// What an issuer answers for the phone (display fields, an address, an activation's comment) is
/// passed on only when it reads as such (`InputRules.phoneText`): the token audit's fake TMP put a
/// card number, terminal escapes and 20 KB in a comment, and the gateway answered all of it.
struct PhoneTextTests {
    @Test(arguments: ["Jane's Visa", "VISA", "Approved by issuer", "Zoë Ångström", "東京都", String(repeating: "a", count: 256)])
    func textThatReadsAsDisplayTextIsKept(text: String) {
        #expect(InputRules.phoneText(text) == text)
    }

    @Test(arguments: [
        "PAN 4111111111111111", "card 4111-1111-1111-1111 ok", "line\nbreak", "esc \u{1B}[31mred", "tab\there", "del\u{7F}",
        "c1\u{85}", "sep\u{2028}", "bidi \u{202E}lanoitan", "isolate \u{2066}x\u{2069}", String(repeating: "a", count: 257), "",
    ])
    func textThatDoesNotIsLeftOut(text: String) {
        #expect(InputRules.phoneText(text) == nil, "\(text.debugDescription)")
    }

    @Test func aPhoneNumberIsNotScreenedForCardNumbersButIsBounded() {
        // 13 digits with a country code: passes the Luhn check, and is a phone number.
        let phone = "8613800138002"
        #expect(InputRules.holdsCardNumber(phone))
        #expect(UserAddress(phone: phone).phone == phone)
        #expect(UserAddress(name: "4111111111111111", phone: String(repeating: "1", count: 33)) == UserAddress())
    }

    @Test func eachPayloadKeepsOnlyWhatReadsAsItsField() throws {
        let comment = "PAN 4111111111111111 \u{1B}[31m" + String(repeating: "x", count: 20_000)
        let activation = TokenActivationResult(outcome: .approved, tokenUniqueReference: "DWSPMC000", cardLast4: "1111", comment: comment)
        #expect(activation.comment == nil)
        #expect(TokenActivationResult(outcome: .approved, tokenUniqueReference: "t", cardLast4: nil, comment: "ok").comment == "ok")

        let samsung = try SamsungPayPayload(provisionPayload: "p", displayName: "Visa 4111111111111111", lastDigits: "１２３４",
                                            network: "VISA\u{0}", tokenServiceProvider: "VISA", cardType: "CREDIT")
        #expect(samsung.displayName == nil && samsung.lastDigits == nil && samsung.network == nil)
        #expect(samsung.tokenServiceProvider == "VISA" && samsung.cardType == "CREDIT")
        #expect(try SamsungPayPayload(provisionPayload: "p", lastDigits: "1234").lastDigits == "1234")

        // The payload itself is an encrypted payload's text: base64 or a JWE passes as it came;
        // a card number in the clear, controls, spaces, other scripts or an oversized one are
        // the issuer's protocol error, never passed on (the upstream audit).
        let jwe = "eyJhbGciOiJSU0EtT0FFUC0yNTYiLCJlbmMiOiJBMjU2R0NNIn0.OKOawDo13gRp2ojaHV7LFpZcgV7T6DVZKTyKOMTYUmKoTCVJRgckCL9kiMT03JGe"
            + ".48V1_ALb6US04U3b.5eym8TW_c8SuK0ltJ3rpYIzOeDQz7TALvtu6UG9oMo4vpzs9tX_EFShS8iB7j6jiSdiwkIr3ajwQzaBtQD_A.XFBoMYUZodetZdvTiFvSkQ"
        #expect(try SamsungPayPayload(provisionPayload: jwe).provisionPayload == jwe)
        let base64 = Data((0..<3_000).map { UInt8($0 % 251) }).base64EncodedString()
        #expect(try SamsungPayPayload(provisionPayload: base64).provisionPayload == base64)
        for refused in ["PAN 4111111111111111 exp 12/30", "4111111111111111", "abc\u{1B}]0;x\u{07}", "a\u{202E}b", "ａｂｃ",
                        String(repeating: "A", count: SamsungPayPayload.maxPayloadBytes + 1)] {
            #expect(throws: GatewayError.self, "\(refused.prefix(40))") { try SamsungPayPayload(provisionPayload: refused) }
        }
        #expect(try SamsungPayPayload(provisionPayload: String(repeating: "A", count: SamsungPayPayload.maxPayloadBytes)).provisionPayload.count
            == SamsungPayPayload.maxPayloadBytes)

        // Google's opaque payment card is the same kind of text, passed on as the issuer wrote it
        // (Google's OPC specification: the base64 text, as a byte array, goes to the phone), so a
        // JWE's dotted parts and base64url pass, and the same screens refuse the rest (the
        // connector audit: it had been decoded and re-encoded, and a JWE refused).
        #expect(try GooglePayPayload(opaquePaymentCard: jwe).opaquePaymentCard.value == jwe)
        #expect(try GooglePayPayload(opaquePaymentCard: "eyJvcGMiOiJzYW5kYm94LW9wYXF1ZS1jYXJkIn0").opaquePaymentCard.value
            == "eyJvcGMiOiJzYW5kYm94LW9wYXF1ZS1jYXJkIn0")
        for refused in ["", "PAN 4111111111111111 exp 12/30", "4111111111111111", "abc\u{1B}]0;x\u{07}", "a\u{202E}b", "ａｂｃ",
                        String(repeating: "A", count: WalletPayloadText.maxBytes + 1)] {
            #expect(throws: GatewayError.self, "\(refused.prefix(40))") { try GooglePayPayload(opaquePaymentCard: refused) }
        }
        let google = try GooglePayPayload(opaquePaymentCard: "T1BD", displayName: "a\u{202E}b", lastDigits: "1234", network: "MASTERCARD")
        #expect(google.displayName == nil && google.network == "MASTERCARD" && google.lastDigits == "1234")
        // Digits other than ASCII's are not last digits (`Character.isNumber` had taken them).
        #expect(throws: GatewayError.self) { try GooglePayPayload(opaquePaymentCard: "T1BD", lastDigits: "١٢٣٤") }
    }
}
