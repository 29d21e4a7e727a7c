#!/usr/bin/env bash
# ECC_V2 encryptions per second on one core, three ways in the same run:
#   - ours: swift-crypto (BoringSSL), `wallet-crypto-bench`;
#   - the same encryption in Python with pyca/cryptography (OpenSSL), `scripts/ecc_v2_bench.py`
#     (a fresh P-256 key, ECDH, the same KDF, AES-256-GCM, the same plaintext; it checks itself
#     against the committed test vector before timing);
#   - `openssl speed ecdhp256`: bare ECDH operations per second, the machine's yardstick.
# Absolute figures depend on the machine and its load; compare the ratios.
# Targets (issue #14): Swift / Python >= 1.0, Swift / openssl ECDH >= 0.6.
set -euo pipefail
cd "$(dirname "$0")/.."
# SECONDS_PER_RUN=3; CONFIG=release (debug only to prove the script runs: its figures mean nothing).
seconds=${SECONDS_PER_RUN:-3}
config=${CONFIG:-release}
swift build -c "$config" --product wallet-crypto-bench >/dev/null 2>&1 || swift build -c "$config" --product wallet-crypto-bench
swift_out=$("$(swift build -c "$config" --show-bin-path)/wallet-crypto-bench" "$seconds")
python_out=$(python3 scripts/ecc_v2_bench.py "$seconds")
openssl_out=$(openssl speed -seconds "$seconds" ecdhp256 2>/dev/null)

field() { awk -v k="$1" '$1 == k {print $2}'; }
ours=$(field ecc_v2_encryptions_per_second <<<"$swift_out")
python=$(field ecc_v2_encryptions_per_second <<<"$python_out")
ecdh=$(awk '/256 bits ecdh \(nistp256\)/ {print $NF}' <<<"$openssl_out")
swift_bytes=$(field plaintext_bytes <<<"$swift_out")
python_bytes=$(field plaintext_bytes <<<"$python_out")
if [[ "$swift_bytes" != "$python_bytes" ]]; then
    echo "plaintext sizes differ: Swift $swift_bytes bytes, Python $python_bytes bytes" >&2
    exit 1
fi

echo "plaintext: $swift_bytes bytes, ${seconds} s per measurement, one core each, run one after the other"
echo "ECC_V2 encryptions/s, Swift (swift-crypto, BoringSSL):        $ours"
echo "ECC_V2 encryptions/s, Python (pyca/cryptography, OpenSSL):    $python"
echo "openssl speed ecdhp256 ops/s (bare ECDH):                     $ecdh"
python3 -c "
print('ratio Swift / Python:          %.2f  (target >= 1.0)' % ($ours / $python))
print('ratio Swift / openssl ECDH:    %.2f  (target >= 0.6)' % ($ours / $ecdh))
print('ratio Python / openssl ECDH:   %.2f' % ($python / $ecdh))"
