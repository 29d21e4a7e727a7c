import Crypto
import Foundation
@testable import Gateway
import ProvisioningCore
import Testing

/// The answers kept for Idempotency-Key replays are replayed only as the gateway sealed them: for
/// the client and key they were sealed for, and never from bytes someone wrote into the store.
@Suite struct ResponseSealerTests {
    let sealer = ResponseSealer(keyring: VaultKeyring(SymmetricKey(size: .bits256)))
    let client = ClientID("client-a")

    @Test func aSealedAnswerOpensForItsClientAndKeyOnly() throws {
        let answer = Data(#"{"provisioning_id":"prv_1"}"#.utf8)
        let sealed = try sealer.seal(answer, client: client, key: "k-1")
        #expect(sealed.range(of: answer) == nil)
        #expect(try sealer.open(sealed, client: client, key: "k-1") == answer)
        #expect(throws: (any Error).self) { try sealer.open(sealed, client: ClientID("client-b"), key: "k-1") }
        #expect(throws: (any Error).self) { try sealer.open(sealed, client: client, key: "k-2") }
    }

    /// A row written into the database as plain JSON (a forged answer) is refused, not replayed.
    @Test func aPlainAnswerInTheStoreIsNotReplayed() throws {
        let forged = Data(#"{"provisioning_id":"prv_forged","issuer":"local"}"#.utf8)
        let refusal = #expect(throws: GatewayError.self) { try sealer.open(forged, client: client, key: "k-1") }
        #expect(refusal?.code == .internal)
        #expect(refusal?.detail.contains("not sealed") == true, "\(String(describing: refusal))")
    }
}
