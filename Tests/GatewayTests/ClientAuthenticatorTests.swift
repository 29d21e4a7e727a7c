import Crypto
import Foundation
import Gateway
import ProvisioningCore
import Testing

@Suite struct ClientAuthenticatorTests {
    static func hash(_ key: String) -> String { Data(SHA256.hash(data: Data(key.utf8))).lowercaseHex }

    let authenticator = ClientAuthenticator(clients: [
        ClientConfig(id: "acme", apiKeySHA256: hash("sk_acme"), programs: ["acme"]),
        ClientConfig(id: "globex", apiKeySHA256: hash("sk_globex"), programs: ["globex", "shared"]),
    ])

    @Test func theRightKeyNamesItsClient() throws {
        #expect(try authenticator.authenticate(authorization: "Bearer sk_acme").id == ClientID("acme"))
        let globex = try authenticator.authenticate(authorization: "bearer sk_globex")
        #expect(globex.programs == ["globex", "shared"])
        // RFC 9110: one or more spaces after the scheme.
        #expect(try authenticator.authenticate(authorization: "Bearer   sk_acme").id == ClientID("acme"))
    }

    /// Rotating a key: the previous ones still name the same client, until the file drops them.
    @Test func aPreviousKeyNamesTheSameClientUntilItIsDropped() throws {
        var acme = ClientConfig(id: "acme", apiKeySHA256: Self.hash("sk_acme_2026"), programs: ["acme"])
        acme.previousAPIKeysSHA256 = [Self.hash("sk_acme")]
        let rotating = ClientAuthenticator(clients: [acme, ClientConfig(id: "globex", apiKeySHA256: Self.hash("sk_globex"), programs: ["globex"])])
        #expect(try rotating.authenticate(authorization: "Bearer sk_acme_2026").id == ClientID("acme"))
        #expect(try rotating.authenticate(authorization: "Bearer sk_acme").id == ClientID("acme"))
        #expect(try rotating.authenticate(authorization: "Bearer sk_globex").id == ClientID("globex"))
        acme.previousAPIKeysSHA256 = []
        #expect(throws: GatewayError.self) { try ClientAuthenticator(clients: [acme]).authenticate(authorization: "Bearer sk_acme") }
    }

    /// A header longer than any key is refused unhashed, saying so (it had said to use Bearer).
    @Test func anOverlongHeaderIsNamedAsSuch() {
        let long = "Bearer " + String(repeating: "k", count: ClientAuthenticator.maxAuthorizationBytes)
        #expect { try authenticator.authenticate(authorization: long) } throws: { error in
            (error as? GatewayError)?.detail.contains("longer than any API key") == true
        }
    }

    @Test(arguments: [nil, "", "sk_acme", "Basic sk_acme", "Bearer ", "Bearer    ", "Bearer sk_acme2", "Bearer SK_ACME", "Bearer sk_acme ", "Bearer\tsk_acme"])
    func anythingElseIsUnauthorized(_ header: String?) {
        #expect(throws: GatewayError.self) { try authenticator.authenticate(authorization: header) }
        do {
            _ = try authenticator.authenticate(authorization: header)
        } catch {
            #expect(error.code == .unauthorized)
            #expect(!error.detail.contains("sk_acme"))
        }
    }

    @Test func aClientMayUseOnlyItsProgramsCards() throws {
        let acme = try authenticator.authenticate(authorization: "Bearer sk_acme")
        let card = { (program: ProgramID) in CardRecord(id: "c", program: program, issuer: "bridge", issuerReference: .init([:])) }
        #expect(acme.mayUse(card("acme")))
        #expect(!acme.mayUse(card("globex")))
    }
}
