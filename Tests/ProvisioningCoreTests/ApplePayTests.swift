import Foundation
import ProvisioningCore
import Testing

@Suite struct ApplePayTests {
    let der = Data([0x30, 0x82, 0x01, 0x00] + Array(repeating: 0x01, count: 32))

    @Test func needsLeafAndSubordinate() {
        #expect(throws: GatewayError.self) {
            try ApplePayProvisioningRequest(certificates: [der], nonce: Data([1]), nonceSignature: Data([2]))
        }
        do {
            _ = try ApplePayProvisioningRequest(certificates: [der], nonce: Data([1]), nonceSignature: Data([2]))
        } catch {
            #expect(error.code == .invalidRequest)
            #expect(error.detail.contains("certificates"))
        }
    }

    @Test func refusesWhatIsNotDER() {
        do {
            _ = try ApplePayProvisioningRequest(certificates: [der, Data("PEM".utf8)], nonce: Data([1]), nonceSignature: Data([2]))
            Issue.record("accepted a non-DER certificate")
        } catch {
            #expect(error.detail.hasPrefix("certificates[1]"))
        }
    }

    @Test func refusesEmptyNonce() {
        #expect(throws: GatewayError(.invalidRequest, "nonce: must be 1 to \(ApplePayProvisioningRequest.maxNonceBytes) bytes")) {
            try ApplePayProvisioningRequest(certificates: [der, der], nonce: Data(), nonceSignature: Data([2]))
        }
    }

    @Test func payloadNeedsAnUncompressedP256Key() throws {
        let good = Data([0x04] + Array(repeating: 7, count: 64))
        _ = try ApplePayPayload(activationData: Data([1]), encryptedPassData: Data([2]), ephemeralPublicKey: good)
        for bad in [Data([0x04] + Array(repeating: 7, count: 63)), Data([0x02] + Array(repeating: 7, count: 64))] {
            do {
                _ = try ApplePayPayload(activationData: Data([1]), encryptedPassData: Data([2]), ephemeralPublicKey: bad)
                Issue.record("accepted a malformed key")
            } catch {
                #expect(error.code == .upstreamProtocolError)
            }
        }
    }

    @Test func sensitiveValuesPrintRedacted() {
        let secret = Sensitive("4111111111111111")
        #expect("\(secret)" == "<redacted>")
        #expect(String(reflecting: secret) == "<redacted>")
        var dumped = ""
        dump(secret, to: &dumped)
        #expect(!dumped.contains("4111"))
        let request = try? ApplePayProvisioningRequest(certificates: [der, der], nonce: Data([0xde, 0xad]), nonceSignature: Data([2]))
        #expect("\(request!.nonce)" == "<redacted>")
        #expect("\(request!.leafCertificate)" == "<redacted>")
    }

    /// (A request whose body did not arrive in time never ran: sent again, it runs once.)
    @Test func everyCodeHasOneStatusAndOnlyOutagesThrottlingShutdownAndBodiesNotArrivedAreRetryable() {
        let retryable = Set(GatewayError.Code.allCases.filter(\.isRetryable))
        #expect(retryable == [.upstreamUnavailable, .upstreamTimeout, .deadlineExceeded, .idempotencyKeyInProgress, .rateLimited, .shuttingDown,
                              .requestTimeout])
        #expect(GatewayError.Code.requestTimeout.httpStatus == 408)
        #expect(GatewayError.Code.shuttingDown.httpStatus == 503)
        #expect(GatewayError.Code.rateLimited.httpStatus == 429)
        #expect(GatewayError.Code.invalidRequest.httpStatus == 400)
        #expect(GatewayError.Code.upstreamProtocolError.httpStatus == 502)
        #expect(GatewayError.Code.upstreamRejected.httpStatus == 422)
    }
}
