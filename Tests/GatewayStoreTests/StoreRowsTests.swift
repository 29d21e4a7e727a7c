import Foundation
@testable import GatewayStore
import ProvisioningCore
import Testing

@Suite struct StoreRowsTests {
    /// What the stores write for an issuer reference reads back as the same reference, escapes
    /// and all (the sorted encoder escapes `/`).
    @Test(arguments: [
        [:],
        ["bridge_card_id": "card_1"],
        ["customer_id": "cus/1", "card_account_id": "a\"b\\c", "note": "café ☕︎", "empty": ""],
    ] as [[String: String]])
    func aStoredReferenceReadsBackAsWritten(_ fields: [String: String]) throws {
        let json = StoreRows.referenceJSON(IssuerReference(fields))
        #expect(try StoreRows.reference(json) == IssuerReference(fields))
    }

    /// A stored reference that is not an object of strings is refused, not read as a partial or
    /// coerced reference.
    @Test(arguments: [#"{"a":1}"#, #"{"a":null}"#, #"{"a":["x"]}"#, #"["a"]"#, #""a""#, "", "{", #"{"a":"x"} trailing"#])
    func aReferenceThatIsNotAnObjectOfStringsIsRefused(_ json: String) {
        #expect(throws: (any Error).self) { try StoreRows.reference(json) }
    }
}
