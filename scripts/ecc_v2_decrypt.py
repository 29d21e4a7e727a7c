#!/usr/bin/env python3
"""Independent ECC_V2 decryption (shared/WALLET-CRYPTO.md) with the `cryptography` package.

Usage: ecc_v2_decrypt.py LEAF_KEY_PEM RESPONSE_JSON REQUEST_JSON EXPECTED_PAN
Opens the gateway's answer with the device's leaf key and checks the card number and the nonce
inside; prints one line and exits non-zero on any mismatch. Never prints the card number.
"""
import base64
import hashlib
import json
import sys

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.ciphers.aead import AESGCM


def main() -> int:
    key_path, response_path, request_path, expected_pan = sys.argv[1:5]
    with open(key_path, "rb") as f:
        leaf = serialization.load_pem_private_key(f.read(), password=None)
    response = json.load(open(response_path))
    request = json.load(open(request_path))

    ephemeral_bytes = base64.b64decode(response["ephemeral_public_key"])
    encrypted = base64.b64decode(response["encrypted_pass_data"])
    ephemeral = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), ephemeral_bytes)
    z = leaf.exchange(ec.ECDH(), ephemeral)
    other_info = bytes([13]) + b"id-aes256-GCM" + b"Apple" + ephemeral_bytes
    key = hashlib.sha256(b"\x00\x00\x00\x01" + z + other_info).digest()
    plaintext = AESGCM(key).decrypt(b"\x00" * 12, encrypted, None)
    data = json.loads(plaintext)

    nonce_hex = base64.b64decode(request["nonce"]).hex()
    ok = data["primaryAccountNumber"] == expected_pan and data["nonce"] == nonce_hex
    print(f"  {response['issuer']:<10} decrypted by Python cryptography: card ending {data['primaryAccountNumber'][-4:]}, "
          f"nonce {'matches' if data['nonce'] == nonce_hex else 'DIFFERS'} -> {'ok' if ok else 'MISMATCH'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
