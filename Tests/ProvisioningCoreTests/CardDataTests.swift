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
}
