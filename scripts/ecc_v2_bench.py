#!/usr/bin/env python3
"""ECC_V2 encryptions per second on one core with pyca/cryptography (OpenSSL), the Python side of
scripts/bench.sh.

Usage: ecc_v2_bench.py [SECONDS]
Does per encryption exactly what ECCV2.encrypt and wallet-crypto-bench do: a fresh ephemeral P-256
key, its uncompressed point (04 || X || Y), ECDH with the device's leaf public key, the KDF
K = SHA-256(00000001 || Z || 0x0D || "id-aes256-GCM" || "Apple" || ephemeral point) and AES-256-GCM
with a zero IV over the same plaintext as the Swift bench. Before timing it checks itself: the
committed test vector (which gives the ephemeral private key) byte for byte, and a decryption of
its own output with the leaf key, as scripts/ecc_v2_decrypt.py does.
Prints `plaintext_bytes N` and `ecc_v2_encryptions_per_second N`.
"""
import hashlib
import json
import os
import sys
import time

from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

CURVE = ec.SECP256R1()
ECDH = ec.ECDH()
IV = b"\x00" * 12
COUNTER = b"\x00\x00\x00\x01"
ALGORITHM_ID = b"id-aes256-GCM"
OTHER_INFO_PREFIX = bytes([len(ALGORITHM_ID)]) + ALGORITHM_ID + b"Apple"

# The Swift bench's PassPlaintext(primaryAccountNumber: "4111111111111111", name: "Bench Cardholder",
# expiryMonth: 12, expiryYear: 2030, nonce: 01020304, nonceSignature: 64 x 09), as its encoded()
# writes it (field order, `/` escaped as `\/`, nonces as lowercase hex).
PLAINTEXT = (
    '{"primaryAccountNumber":"4111111111111111","name":"Bench Cardholder","expiration":"12\\/30",'
    '"nonce":"01020304","nonceSignature":"' + "09" * 64 + '"}'
).encode()


def symmetric_key(z: bytes, ephemeral_point: bytes) -> bytes:
    return hashlib.sha256(COUNTER + z + OTHER_INFO_PREFIX + ephemeral_point).digest()


def encrypt(plaintext: bytes, leaf_public: ec.EllipticCurvePublicKey, ephemeral=None):
    """-> (encrypted pass data = ciphertext || tag, ephemeral public key 04 || X || Y)"""
    if ephemeral is None:
        ephemeral = ec.generate_private_key(CURVE)
    point = ephemeral.public_key().public_bytes(Encoding.X962, PublicFormat.UncompressedPoint)
    key = symmetric_key(ephemeral.exchange(ECDH, leaf_public), point)
    return AESGCM(key).encrypt(IV, plaintext, None), point


def decrypt(encrypted: bytes, point: bytes, leaf: ec.EllipticCurvePrivateKey) -> bytes:
    """The device's side, as scripts/ecc_v2_decrypt.py does it."""
    ephemeral_public = ec.EllipticCurvePublicKey.from_encoded_point(CURVE, point)
    return AESGCM(symmetric_key(leaf.exchange(ECDH, ephemeral_public), point)).decrypt(IV, encrypted, None)


def self_check() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "..", "Tests", "WalletCryptoTests", "Fixtures", "ecc_v2.json")) as f:
        v = json.load(f)
    leaf = ec.derive_private_key(int(v["leaf_private_key"], 16), CURVE)
    ephemeral = ec.derive_private_key(int(v["ephemeral_private_key"], 16), CURVE)
    encrypted, point = encrypt(v["plaintext"].encode(), leaf.public_key(), ephemeral)
    assert point.hex() == v["ephemeral_public_key"], "ephemeral public key differs from the vector"
    assert symmetric_key(ephemeral.exchange(ECDH, leaf.public_key()), point).hex() == v["symmetric_key"], "KDF differs"
    assert encrypted.hex() == v["encrypted_pass_data"], "encrypted pass data differs from the vector"

    # A fresh ephemeral key, as in the timed loop: the device opens it, and keys are never reused.
    first, first_point = encrypt(PLAINTEXT, leaf.public_key())
    second, second_point = encrypt(PLAINTEXT, leaf.public_key())
    assert first_point != second_point and first != second, "ephemeral key reused"
    assert decrypt(first, first_point, leaf) == PLAINTEXT and decrypt(second, second_point, leaf) == PLAINTEXT
    assert len(first) == len(PLAINTEXT) + 16


def main() -> int:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0
    self_check()
    leaf_public = ec.generate_private_key(CURVE).public_key()
    plaintext = PLAINTEXT
    for _ in range(200):  # warm-up, as the Swift bench
        encrypt(plaintext, leaf_public)
    count = 0
    clock = time.perf_counter
    start = clock()
    end = start + seconds
    while clock() < end:
        for _ in range(100):
            encrypt(plaintext, leaf_public)
        count += 100
    elapsed = clock() - start
    print(f"plaintext_bytes {len(plaintext)}")
    print(f"ecc_v2_encryptions_per_second {count / elapsed:.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
