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
