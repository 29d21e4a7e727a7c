import Foundation
@testable import Gateway
import ProvisioningCore
import Testing

/// What a registration's refusal tells its caller: ops see why, a tenant sees no more than that
/// it cannot use the issuer.
@Suite struct CardRegistrationTests {
    static let registration = CardRegistration(issuers: try! ConfigLoader.load(
        path: ConfigLoaderTests.packageRoot.appendingPathComponent("Config/gateway.yaml").path).issuers)

    /// The sandbox's `tmp` serves program `demo` only.
    static let reference = ["issuer_card_id": "t_1"]

    @Test func anAdminIsToldWhyAnIssuerCannotTakeTheCard() {
        let elsewhere = Self.registration.check(id: "card_1", program: "other", issuer: "tmp", reference: Self.reference)
        #expect(elsewhere.refusal == ["issuer: tmp does not serve program other (issuers.tmp.programs)"])
        let unknown = Self.registration.check(id: "card_1", program: "other", issuer: "stripe", reference: Self.reference)
        #expect(unknown.refusal.count == 1 && unknown.refusal[0].hasPrefix("issuer: unknown issuer 'stripe' (configured: bridge, crossmint"))
    }

    /// A program is a name the caller typed (a CSV cell, a request): a card number in its place
    /// is never repeated.
    @Test func aCardNumberInThePlaceOfAProgramIsNotRepeated() {
        let refused = Self.registration.check(id: "card_1", program: "5500005555555559", issuer: "tmp", reference: Self.reference)
        #expect(refused.shape == [InputRules.nameRule("program")], "a program is never a card number: \(refused.shape)")
        #expect(!(refused.shape + refused.refusal).joined().contains("55000055"), "\(refused.refusal)")
    }

    /// Marqeta's `card_token` bound comes from its published swagger, read here, not from the
    /// issuer's own constant: a token at the bound is taken, one character more is refused, and
    /// other kinds (TMP's ids) have no such bound.
    @Test func aMarqetaCardTokenIsBoundedAsTheSwaggerSays() throws {
        let swagger = try JSONSerialization.jsonObject(with: Data(contentsOf: ConfigLoaderTests.packageRoot
            .appendingPathComponent("Tests/IssuersTests/Fixtures/upstream-specs/marqeta-core-api-swagger.json"))) as? [String: Any]
        let definitions = try #require(swagger?["definitions"] as? [String: Any])
        let bounds = Set(["digital_wallet_apple_pay_provision_request", "digital_wallet_android_pay_provision_request",
                          "digital_wallet_samsung_pay_provision_request"].map { name -> Int? in
            let properties = (definitions[name] as? [String: Any])?["properties"] as? [String: Any]
            return (properties?["card_token"] as? [String: Any])?["maxLength"] as? Int
        })
        let bound = try #require(bounds.count == 1 ? bounds.first ?? nil : nil, "the swagger's card_token bounds: \(bounds)")
        let at = String(repeating: "m", count: bound), over = String(repeating: "m", count: bound + 1)
        #expect(Self.registration.check(id: "card_1", program: "demo", issuer: "marqeta", reference: ["issuer_card_id": at]).all.isEmpty)
        let refused = Self.registration.check(id: "card_1", program: "demo", issuer: "marqeta", reference: ["issuer_card_id": over])
        #expect(refused.refusal == ["issuer_reference.issuer_card_id: at most \(bound) characters for a marqeta card (Marqeta's card_token)"])
        #expect(refused.shape.isEmpty)
        #expect(Self.registration.check(id: "card_1", program: "demo", issuer: "tmp", reference: ["issuer_card_id": over]).all.isEmpty)
    }

    @Test func aTenantCannotTellAnIssuerOfOtherProgramsFromNone() {
        let elsewhere = Self.registration.check(id: "card_1", program: "other", issuer: "tmp", reference: Self.reference, namingIssuers: false)
        let unknown = Self.registration.check(id: "card_1", program: "other", issuer: "tmq", reference: Self.reference, namingIssuers: false)
        #expect(elsewhere.refusal == ["issuer: no issuer 'tmp' serves program other"])
        #expect(unknown.refusal == ["issuer: no issuer 'tmq' serves program other"])
        // A wrong reference field is not checked first for the existing one: that would tell them apart.
        let wrongField = Self.registration.check(id: "card_1", program: "other", issuer: "tmp", reference: ["customer_id": "c"], namingIssuers: false)
        #expect(wrongField.refusal == elsewhere.refusal)
    }

    @Test func aTenantStillLearnsWhatItsOwnIssuerNeeds() {
        let missing = Self.registration.check(id: "card_1", program: "demo", issuer: "tmp", reference: [:], namingIssuers: false)
        #expect(missing.refusal == ["issuer_reference.issuer_card_id: required for a tmp card"])
    }
}
