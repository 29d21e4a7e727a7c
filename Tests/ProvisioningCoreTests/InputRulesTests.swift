import ProvisioningCore
import Testing

/// Card ids wherever they enter (the API, the CLI's imports): dots alone are refused, since `.`
/// and `..` are path segments to URL tools; dots among other characters are ids like any.
struct InputRulesTests {
    @Test(arguments: [".", "..", "...", String(repeating: ".", count: 128)])
    func dotsAloneAreNoCardID(id: String) {
        #expect(!InputRules.isCardID(id))
    }

    @Test(arguments: ["demo..1", "..a", "a.", "acme:1234", "card_bridge_demo", String(repeating: "a", count: 128)])
    func idsWithDotsAmongOtherCharactersAreCardIDs(id: String) {
        #expect(InputRules.isCardID(id))
    }

    @Test func theRuleTextSaysSo() {
        #expect(InputRules.cardIDRule.hasSuffix("not dots alone"))
        #expect(!InputRules.isCardID("") && !InputRules.isCardID(String(repeating: "a", count: 129)))
    }
}
