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

    /// A card number is never a card id, however grouped or prefixed: an id is logged, audited
    /// and echoed.
    @Test(arguments: ["4111111111111111", "5555-5555-5555-4444", "acme:4111-1111-1111-1111", "card_378282246310005",
                      "3782-822463-10005", "6011111111111117", "2223003122003222", "4111111111111111_2", "4111.1111.1111.1111",
                      "x:4111_1111_1111_1111", "8171999927660000",
                      // Other splits (the leak audit's, each had been taken as an id): 4-12, 8-8, 12-4, 4-4-8, doubled separators.
                      "4929-200100000005", "49292007-00000009", "492920350000-0005", "4929-2017-00000007", "4929--2007--0000--0009",
                      "4111::1111::1111::1111", "card_4111-111111111111",
                      // Printed in its groups, with more digit groups before or after it (the input probe's).
                      "4111-1111-1111-1111-1", "acme-4111-1111-1111-1111-1", "1-4111-1111-1111-1111", "4111.1111.1111.1111.5",
                      "4111_1111_1111_1111_1", "5555-5555-5555-4444-3", "12-3782-822463-10005", "4111-1111-1111-1111-24-11"])
    func aCardNumberIsNoCardID(id: String) {
        #expect(InputRules.holdsCardNumber(id))
        #expect(!InputRules.isCardID(id) && InputRules.hasCardIDShape(id))
    }

    /// Separators no card id can hold, in values that are no ids (a token reference, a request
    /// id, `tracestate`), and a card number beside a UUID: each still reads as a card number.
    @Test(arguments: ["4929/2035/0000/0005", "4111,1111,1111,1111", "4111+1111+1111+1111", "vnd=4929-201700000007",
                      "4523b2b3-fc10-4c3f-aba2-865903204869 4111111111111111"])
    func cardNumbersWrittenOtherwiseAreFound(text: String) {
        #expect(InputRules.holdsCardNumber(text))
    }

    /// A UUID whose first groups are all decimal digits (a 16-digit run across two `-` that may
    /// pass the Luhn check) is a UUID, anywhere in the text.
    @Test func aUUIDsDigitsAreNoCardNumber() {
        // 12345678-1234-1232 is 16 digits passing the Luhn check: found alone, not in a UUID.
        #expect(InputRules.holdsCardNumber("12345678-1234-1232"))
        #expect(!InputRules.holdsCardNumber("12345678-1234-1232-abcd-0123456789ab"))
        #expect(!InputRules.holdsCardNumber("key:12345678-1234-1232-abcd-0123456789ab:2"))
    }

    /// A number that fails the Luhn check, one in a word (a letter right before or after it), a
    /// UUID's or a date's groups: ids like any.
    @Test(arguments: ["4111111111111112", "411111111111", "41111111111111111111", "acme:4111a111111111111", "c4111111111111111",
                      "4111111111111111x", "0111111111111111", "card-2024-0115-000123", "4523b2b3-fc10-4c3f-aba2-865903204869",
                      "12345678-1234-4123-8123-123456789012", "prv_01a2187f60baa2cd21f14929eba47e7b", "req_1f7bf5c99888e50db2f4c52a9b52ca10",
                      // A Unix time and a counter, a date and a time: no card's split, whatever the Luhn check says.
                      "key-1732662000-12340", "1732662000-12357", "order-20241126-093000", "20241126-093000",
                      // A card's groups with a letter right after the last: a word, as before.
                      "1-4111-1111-1111-1111x", "4111-1111-1111-1111x",
                      // Five or six groups of four (a date, a time and a sequence; a printed IBAN's
                      // digits): no card's print, though four of them in a row pass the check (the review).
                      "2024-1126-0930-0015-0005", "PL61 1090 1014 0000 0712 1981 2874", "4111-1111-1111-1111-2024"])
    func otherNumbersAreNotCardNumbers(id: String) {
        #expect(!InputRules.holdsCardNumber(id))
    }

    /// Random UUIDs, the commonest id there is, are never taken for card numbers (a first version
    /// took about one in a thousand, through a run of digits that crossed a `-`). Seeded, so a
    /// failure replays.
    @Test func randomUUIDsAreNeverCardNumbers() {
        var random = SplitMix64(seed: 20261126)
        let hex = Array("0123456789abcdef")
        var refused: [String] = []
        for _ in 0..<50_000 {
            var characters = (0..<32).map { _ in hex[Int(random.next() % 16)] }
            characters[12] = "4"
            characters[16] = hex[8 + Int(random.next() % 4)]
            let text = String(characters)
            let uuid = [text.prefix(8), text.dropFirst(8).prefix(4), text.dropFirst(12).prefix(4), text.dropFirst(16).prefix(4), text.dropFirst(20)]
                .joined(separator: "-")
            if InputRules.holdsCardNumber(uuid) { refused.append(uuid) }
        }
        #expect(refused.isEmpty, "\(refused.count) UUIDs read as card numbers: \(refused.prefix(3))")
    }

    /// A name (a program, an issuer, a client) is never a card number alone; one with a word in it
    /// is a name, since one long number in ten passes the Luhn check by chance. Issuer references
    /// are the issuer's ids, taken as given (an integrator may choose numeric ones).
    @Test func aNameIsNeverACardNumberAlone() {
        #expect(!InputRules.isName("4111111111111111") && !InputRules.isName("4111-1111-1111-1111"))
        #expect(InputRules.isName("acme") && InputRules.isName("program-2024") && InputRules.isName("4111111111111112"))
        #expect(InputRules.isName("acme-4111111111111111") && InputRules.isName("acme-20240115093000002"))
        #expect(InputRules.isCardNumber("4111 1111 1111 1111") && !InputRules.isCardNumber("cards-4111111111111111.csv"))
        #expect(InputRules.referenceValueProblem("4111111111111111") == nil && InputRules.referenceValueProblem("ca_1234") == nil)
        #expect(InputRules.referenceValueProblem("x%2Fcards") == "must not hold %" && InputRules.referenceValueProblem("ca%41") == "must not hold %")
        #expect(InputRules.nameRule("program").hasSuffix("never a card number"))
    }

    /// What may be a credential, wherever it would be repeated: markers of API keys, key-value
    /// pairs naming one, PEM, JWT, UUIDs (issuers' tokens), mixed-case random runs. Codes, names
    /// and our own lower-case hex ids are none.
    @Test func credentialsAreToldFromCodesAndNames() {
        for secret in ["sk_live_UPCRED_BRIDGE_0001xyz", "Bearersk_test_abc", "sk-live-0123", "whsec_abc", "api_key=abc", "x token=1",
                       "-----BEGIN PRIVATE KEY-----", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0", "3f6c2a1e-9b1d-4c2e-8f00-1a2b3c4d5e6f",
                       "aB3dE5fG7hJ9kL1mN2pQ"] {
            #expect(InputRules.looksLikeCredential(secret), "\(secret)")
        }
        for code in ["invalid_nonce", "card.not-found.v2", "INVALID_FIELD", "error_1234567 at step 12", "bearer", "header:X-Api-Key",
                     "prv_01a2187f60baa2cd21f14929eba47e7b", "req_1f7bf5c99888e50db2f4c52a9b52ca10", "acme-20240115093000002",
                     "idempotency_ttl_seconds", "digital_wallet_token_transition_response"] {
            #expect(!InputRules.looksLikeCredential(code), "\(code)")
        }
        #expect(!InputRules.looksLikeCredential("3f6c2a1e-9b1d-4c2e-8f00-1a2b3c4d5e6f", uuids: false))
        #expect(InputRules.withoutCredentials("unknown issuer 'sk_live_abc' (configured: bridge)") == "unknown issuer '(not shown)' (configured: bridge)")
        #expect(InputRules.withoutCredentials("unknown issuer 'bridge'") == "unknown issuer 'bridge'")
        #expect(InputRules.short("sk_live_abc") == "(not shown)" && InputRules.short("card_bridge_demo") == "card_bridge_demo")
    }

    @Test func theRuleTextSaysSo() {
        #expect(InputRules.cardIDRule.hasSuffix("not dots alone, and never a card number"))
        #expect(!InputRules.isCardID("") && !InputRules.isCardID(String(repeating: "a", count: 129)))
    }

    /// What a problem or a log line repeats of the caller's text: never a run of 8 digits, however
    /// spaced or dashed (it may be a card number), never another character than an id's.
    @Test(arguments: [
        ("card_bridge_demo", "card_bridge_demo"),
        ("acme:1234", "acme:1234"),
        ("order-1234567", "order-1234567"),
        ("4111111111111111", "?"),
        ("4111 1111 1111 1111", "?"),
        ("pan_4111-1111-1111-1111_x", "pan_?_x"),
        ("4111+1111,1111\t1111", "?"),
        ("a\u{1B}[31m", "a??31m"),
        ("x12345678", "x?"),
    ])
    func shortShowsNoCardNumberAndNoForeignCharacter(text: String, shown: String) {
        #expect(InputRules.short(text) == shown)
    }

    @Test func shortIsAtMost64CharactersAndSaysSo() {
        #expect(InputRules.short(String(repeating: "a", count: 64)) == String(repeating: "a", count: 64))
        #expect(InputRules.short(String(repeating: "a", count: 65)) == String(repeating: "a", count: 64) + "...")
        #expect(InputRules.short(String(repeating: "a", count: 60) + "123456789") == String(repeating: "a", count: 60) + "1234...")
    }

    @Test(arguments: [
        ("Unexpected content type, expected: application/json, received: application/4111111111111111+json",
         "Unexpected content type, expected: application/json, received: application/?+json"),
        ("accept 4111 1111 1111 1111.", "accept ?."),
        ("4111+1111,1111\t1111 and 4111,111", "? and 4111,111"),
        ("no digits here, 1234567 is seven", "no digits here, 1234567 is seven"),
    ])
    func longDigitRunsAreTakenOutOfQuotedText(text: String, shown: String) {
        #expect(InputRules.withoutLongDigitRuns(text) == shown)
    }

    @Test(arguments: [
        ("4111111111111111", true), ("4111-1111.1111,1111", true), ("4111+1111+1111+1111", true), ("code 1234 5678", true),
        ("abc1234567", false), ("1234567a1234567", false), ("ERR_42", false), ("", false),
        // Each digit followed by a variation selector: one Character each, eight digits still.
        ("4\u{FE0F}1\u{FE0F}1\u{FE0F}1\u{FE0F}1\u{FE0F}1\u{FE0F}1\u{FE0F}1\u{FE0F}", true),
    ])
    func aLongDigitRunIsEightDigitsWithNoLetterBetween(text: String, found: Bool) {
        #expect(InputRules.hasLongDigitRun(text) == found, "\(text)")
    }
}

