import Foundation
import ProvisioningCore
import Testing

/// What `vault put` and the sandbox's cards accept as a card's data.
@Suite struct CardDataTests {
    /// A number whose Luhn check digit does not hold has a digit typed wrong: it is refused before
    /// it is sealed, without being repeated. Test numbers of every network pass.
    @Test(arguments: ["4111111111111111", "5500005555555559", "378282246310005", "6011111111111117", "4012888888881881", "4000000000000077"])
    func numbersWhoseCheckDigitHoldsAreTaken(number: String) throws {
        #expect(try CardData(number: number, name: "J", expiry: "01/30").number == number)
    }

    @Test(arguments: ["4111111111111112", "5500005555555558", "378282246310006", "4111111111111121"])
    func aWrongDigitIsRefused(number: String) {
        #expect(throws: GatewayError(.invalidRequest, "number: its check digit (Luhn) does not hold: a digit is wrong")) {
            try CardData(number: number, name: "J", expiry: "01/30")
        }
    }

    /// A name goes into the pass's plaintext as it is: letters (any script, with their marks),
    /// spaces and `. ' - , /`, 1 to 26 scalars (vault audit: a newline, an escape, a bell, spaces
    /// alone and one letter with 3,000 combining marks had all been sealed).
    @Test(arguments: ["Jane Doe", "J", "O'Brien-Smith, Jr.", "Zo\u{00EB} M\u{00FC}ller", "Zoe\u{0308}", "\u{674E}\u{5C0F}\u{9F8D}", "A/B"])
    func cardholderNamesAreTaken(name: String) throws {
        #expect(try CardData(number: "4111111111111111", name: name, expiry: "01/30").name == name)
    }

    @Test(arguments: ["", " ", "   ", " Jane", "Jane ", "Jane\nDoe", "Jane\u{1B}[31m", "Jane\u{07}", "Jane_Doe", "Jane1",
                      "A" + String(repeating: "\u{0301}", count: 3_000), String(repeating: "a", count: 27), "\u{0301}a", "a \u{0301}"])
    func otherNamesAreRefused(name: String) {
        #expect(throws: GatewayError(.invalidRequest, CardData.nameRule)) {
            try CardData(number: "4111111111111111", name: name, expiry: "01/30")
        }
    }

    /// Two digits each, as printed (`Int` alone had read `09/+3` as 2003 and `0009/30` as 09/30).
    @Test(arguments: ["09/+3", "0009/30", "9/30", "09/3", "09-30", "13/30", "00/30", "09/30/1", "ab/cd", ""])
    func anExpiryIsMMSlashYY(expiry: String) {
        #expect(throws: GatewayError(.invalidRequest, "expiry: must be MM/YY")) {
            try CardData(number: "4111111111111111", name: "J", expiry: expiry)
        }
    }

    /// A card past the end of its expiry month is no card to seal (`vault put` refuses it).
    @Test func anExpiredCardIsToldAsOfItsMonthsEnd() throws {
        let now = ISO8601DateFormatter().date(from: "2026-11-26T12:00:00Z")!
        #expect(try CardData(number: "4111111111111111", name: "J", expiry: "11/26").expiredProblem(at: now) == nil)
        #expect(try CardData(number: "4111111111111111", name: "J", expiry: "12/26").expiredProblem(at: now) == nil)
        #expect(try CardData(number: "4111111111111111", name: "J", expiry: "10/26").expiredProblem(at: now)
                == "expiry: the card expired at the end of 10/26")
        #expect(try CardData(number: "4111111111111111", name: "J", expiry: "01/20").expiredProblem(at: now) != nil)
    }
}
