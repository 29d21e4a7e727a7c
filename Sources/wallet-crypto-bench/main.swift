import Crypto
import Foundation
import WalletCrypto

// ECC_V2 encryptions per second on one core (this process runs one thread of work): a fresh
// ephemeral key, ECDH, the KDF and AES-256-GCM over a typical pass plaintext, as the local issuer
// does per request (the recipient's public key is parsed once, as a request's leaf certificate is;
// the ephemeral key is new for every encryption). `scripts/bench.sh` prints this beside the same
// encryption in Python (scripts/ecc_v2_bench.py, which uses the same plaintext) and
// `openssl speed ecdhp256`, from the same run.
let seconds = Double(CommandLine.arguments.dropFirst().first ?? "") ?? 3
let leaf = P256.KeyAgreement.PrivateKey().publicKey
let plaintext = try PassPlaintext(primaryAccountNumber: "4111111111111111", name: "Bench Cardholder", expiryMonth: 12, expiryYear: 2030,
                                  nonce: Data([1, 2, 3, 4]), nonceSignature: Data(repeating: 9, count: 64)).encoded()
let clock = ContinuousClock()
for _ in 0..<200 { _ = try ECCV2.encrypt(plaintext, for: leaf) }  // warm-up
var count = 0
let start = clock.now
let end = start.advanced(by: .milliseconds(Int64(seconds * 1000)))
while clock.now < end {
    for _ in 0..<100 { _ = try ECCV2.encrypt(plaintext, for: leaf) }
    count += 100
}
let elapsed = start.duration(to: clock.now)
let perSecond = Double(count) / (Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
print("plaintext_bytes \(plaintext.count)")
print(String(format: "ecc_v2_encryptions_per_second %.0f", perSecond))
