import Crypto
import Foundation
import Sandbox
import Testing
import WalletCrypto
import SwiftASN1
import X509

@Suite struct ChainValidationTests {
    func validator(for device: SandboxDevice) -> ApplePayChainValidator {
        ApplePayChainValidator(trustAnchors: [device.root])
    }

    @Test func aGoodSandboxChainPassesAndYieldsTheLeafKey() async throws {
        let device = try SandboxDevice.make()
        let key = try await validator(for: device).validate(leaf: device.leafDER, subordinate: device.subordinateDER)
        #expect(key.x963Representation == device.leafPrivateKey?.publicKey.x963Representation)
    }

    @Test(arguments: [
        (SandboxDevice.Flaw.expiredLeaf, "expired"),
        (.missingMarker, "marker extension"),
        (.leafNotP256, "not a P-256 key"),
        (.wrongSignature, "certificates[0]'s signature does not verify"),
        (.leafNotForKeyAgreement, "not for key agreement"),
        (.leafIsCA, "is a certificate authority"),
        (.noIntermediate, "certificates[1] is a root, not the intermediate"),
        (.intermediateNotCA, "fails RFC 5280 validation"),
    ])
    func eachBrokenChainFailsWithItsReason(flaw: SandboxDevice.Flaw, reason: String) async throws {
        let device = try SandboxDevice.make(flaw: flaw)
        do {
            _ = try await validator(for: device).validate(leaf: device.leafDER, subordinate: device.subordinateDER)
            Issue.record("a chain with \(flaw) passed")
        } catch {
            #expect(error.reason.contains(reason), "\(error.reason)")
        }
    }

    /// swift-certificates' own failure reasons print whole certificates: the reason the caller
    /// reads (and the log) names the rule, never a certificate's serial, names or extensions.
    @Test func aFailedPolicyCheckCarriesNoCertificateContents() async throws {
        let device = try SandboxDevice.make(flaw: .intermediateNotCA)
        do {
            _ = try await validator(for: device).validate(leaf: device.leafDER, subordinate: device.subordinateDER)
            Issue.record("an intermediate that is no CA passed")
        } catch {
            let serial = device.subordinate.serialNumber.description
            #expect(!error.reason.contains(serial), "\(error.reason)")
            #expect(!error.reason.contains("Sandbox"), "\(error.reason)")
            #expect(!error.reason.contains("Certificate("), "\(error.reason)")
        }
    }

    /// Under Apple's root the intermediate must be Apple's WWDR CA - G2; the rule is a root's key
    /// and a name, so it is shown here with the sandbox root in Apple's place.
    @Test func underARootThatNamesItsIntermediateAnotherIntermediateIsRefused() async throws {
        let device = try SandboxDevice.make()
        let strict = ApplePayChainValidator(trustAnchors: [device.root],
                                            intermediateNames: [device.root.publicKey: ApplePayChainValidator.appleIntermediateName])
        do {
            _ = try await strict.validate(leaf: device.leafDER, subordinate: device.subordinateDER)
            Issue.record("an intermediate of another name passed")
        } catch {
            #expect(error.reason.contains("is not the intermediate the root issues device certificates under"), "\(error.reason)")
        }
        let named = try #require(ApplePayChainValidator.commonName(of: device.subordinate))
        let matching = ApplePayChainValidator(trustAnchors: [device.root], intermediateNames: [device.root.publicKey: named])
        _ = try await matching.validate(leaf: device.leafDER, subordinate: device.subordinateDER)
        // Apple's published intermediate reads as the name the production rule asks for, and that
        // rule is on by default for Apple's root.
        let der = try Data(contentsOf: try #require(Bundle.module.url(forResource: "AppleWWDRCAG2", withExtension: "cer", subdirectory: "Fixtures")))
        #expect(ApplePayChainValidator.commonName(of: try Certificate(derEncoded: Array(der))) == ApplePayChainValidator.appleIntermediateName)
        let production = try ApplePayChainValidator.production()
        #expect(production.intermediateNames == [try ApplePayChainValidator.appleRootCAG3().publicKey: ApplePayChainValidator.appleIntermediateName])
    }

    @Test func aChainUnderAnotherRootFails() async throws {
        let device = try SandboxDevice.make()
        let stranger = try SandboxDevice.make()
        do {
            _ = try await validator(for: stranger).validate(leaf: device.leafDER, subordinate: device.subordinateDER)
            Issue.record("a chain under an untrusted root passed")
        } catch {
            #expect(error.reason.contains("does not lead to a trusted root"), "\(error.reason)")
            #expect(!error.reason.contains("signature does not verify"))
        }
    }

    @Test func aTruncatedCertificateIsNamed() async throws {
        let device = try SandboxDevice.make()
        do {
            _ = try await validator(for: device).validate(leaf: device.leafDER.prefix(40), subordinate: device.subordinateDER)
            Issue.record("a truncated leaf passed")
        } catch {
            #expect(error.reason == "certificates[0]: not a valid X.509 certificate")
        }
    }

    @Test func appleRootCAG3LoadsAndIsTheProductionAnchor() throws {
        let root = try ApplePayChainValidator.appleRootCAG3()
        let der = try Data(contentsOf: try #require(Bundle.module.url(forResource: "AppleWWDRCAG2", withExtension: "cer", subdirectory: "Fixtures")))
        let wwdr = try Certificate(derEncoded: Array(der))
        #expect(root.subject.description.contains("Apple Root CA - G3"))
        #expect(wwdr.issuer == root.subject)
        #expect(root.publicKey.isValidSignature(wwdr.signature, for: wwdr))
        let production = try ApplePayChainValidator.production()
        #expect(production.trustAnchors == [root])
        // The published fingerprint of Apple Root CA - G3 (WALLET-CRYPTO.md).
        var serializer = DER.Serializer()
        try serializer.serialize(root)
        let fingerprint = SHA256.hash(data: serializer.serializedBytes).map { String(format: "%02X", $0) }.joined(separator: ":")
        #expect(fingerprint == "63:34:3A:BF:B8:9A:6A:03:EB:B5:7E:9B:3F:5F:A7:BE:7C:4F:5C:75:6F:30:17:B3:A8:C4:88:C3:65:3E:91:79")
    }

    @Test func aSandboxChainIsRefusedUnderProductionTrust() async throws {
        let device = try SandboxDevice.make()
        await #expect(throws: ApplePayChainValidator.Failure.self) {
            try await ApplePayChainValidator.production().validate(leaf: device.leafDER, subordinate: device.subordinateDER)
        }
    }
}
