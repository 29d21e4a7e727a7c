import Foundation
import Hummingbird
import Issuers
import ProvisioningCore
import Testing

/// The scenarios every connector runs; each upstream's suite supplies only its data.
enum ConnectorScenarios {
    typealias MakeConnector = @Sendable (URL, UpstreamHTTP) -> any IssuerConnector

    /// Sends the sandbox device's request to a replayed upstream answer.
    static func replay(
        status: HTTPResponse.Status, body: Data, card: CardRecord, make: MakeConnector
    ) async throws -> (result: Result<ApplePayPayload, GatewayError>, request: CapturedRequest) {
        let request = try Fixtures.deviceRequest()
        return try await withReplay(status: status, body: body) { url, capture in
            let result = try await withUpstreamHTTP(card.issuer ?? "test") { http -> Result<ApplePayPayload, GatewayError> in
                do throws(GatewayError) {
                    return .success(try await make(url, http).provisionApplePay(request, card: card, context: Fixtures.context()))
                } catch {
                    return .failure(error)
                }
            }
            let captured = try #require(await capture.requests.first)
            return (result, captured)
        }
    }

    /// A documented response decodes to the bytes Python's independent reading expects.
    static func documentedResponseDecodes(fixture: String, card: CardRecord, make: MakeConnector) async throws {
        let (result, _) = try await replay(status: .ok, body: try Fixtures.data(fixture), card: card, make: make)
        let payload = try result.get()
        let expected = try Fixtures.expected(fixture)
        #expect(payload.activationData.value == expected.activation)
        #expect(payload.encryptedPassData.value == expected.encrypted)
        #expect(payload.ephemeralPublicKey.value == expected.key)
    }

    /// An upstream error answer maps to its unified code and keeps the upstream status.
    static func errorMaps(status: Int, body: Data, to code: GatewayError.Code, card: CardRecord, make: MakeConnector) async throws {
        let (result, _) = try await replay(status: .init(code: status), body: body, card: card, make: make)
        switch result {
        case .success: Issue.record("HTTP \(status) was taken as a success")
        case .failure(let error):
            #expect(error.code == code)
            #expect(error.upstreamStatus == status)
        }
    }

    /// Error codes an issuer may send, each with whether the gateway may repeat it in the error's
    /// detail (which reaches the caller and the logs): a name from a vocabulary yes; a card number,
    /// an echoed credential, terminal escapes or a novel no, left out whole.
    static let errorCodes: [(code: String, shown: Bool)] = [
        ("invalid_nonce", true),
        ("card.not-found.v2", true),
        ("invalid_nonce pan=4111111111111111", false),
        ("4111111111111111", false),
        ("card 4111 1111 1111 1111", false),
        ("4111-1111-1111-1111", false),
        ("4111_1111_1111_1111", false),
        ("ref 12.34.56.78", false),
        ("error_1234567 at step 12", true),
        ("bad key sk_live_0123456789abcdef", false),
        // Credentials in a code's shape (the leak audit's): a key's marker, a UUID token, a random token.
        ("sk_live_UPCRED_BRIDGE_0001xyz", false),
        ("3f6c2a1e-9b1d-4c2e-8f00-1a2b3c4d5e6f", false),
        ("aB3dE5fG7hJ9kL1mN2pQ", false),
        ("x\u{1B}[31mred", false),
        (String(repeating: "a", count: 101), false),
        ("code\nInjected: header", false),
    ]

    /// An issuer's 400 whose error body (`body(code)`) carries each code of `errorCodes`: the
    /// refusal is `upstream_rejected` either way, and its detail holds the code only when it
    /// reads as one.
    static func anIssuersErrorCodeIsRepeatedOnlyWhenItReadsAsOne(body: (String) throws -> Data, card: CardRecord,
                                                                  make: MakeConnector) async throws {
        for (code, shown) in errorCodes {
            let (result, _) = try await replay(status: .badRequest, body: try body(code), card: card, make: make)
            guard case .failure(let error) = result else { Issue.record("HTTP 400 was taken as a success"); continue }
            #expect(error.code == .upstreamRejected)
            #expect(error.detail.contains("(\(code))") == shown, "\(error.detail)")
            if !shown {
                #expect(!error.detail.contains("4111") && !error.detail.contains("sk_live") && !error.detail.contains("\u{1B}")
                        && !error.detail.contains("aaaaaaaaaa") && !error.detail.contains("\n"), "\(error.detail)")
            }
        }
    }

    static let garbageBodies: [String] = [
        "<html>502 Bad Gateway</html>",
        "{}",
        #"{"unexpected": true}"#,
    ]

    /// A 200 that is not the documented shape, or whose key is not a P-256 point, never reaches a phone.
    static func malformedAnswersAreProtocolErrors(_ bodies: [String], card: CardRecord, make: MakeConnector) async throws {
        for body in bodies {
            let (result, _) = try await replay(status: .ok, body: Data(body.utf8), card: card, make: make)
            switch result {
            case .success: Issue.record("accepted a malformed answer: \(body)")
            case .failure(let error): #expect(error.code == .upstreamProtocolError, "\(body)")
            }
        }
    }
}
