#!/usr/bin/env bash
# ECC_V2 encryptions per second on one core, beside `openssl speed ecdhp256` (ECDH operations per
# second on one core) measured in the same run; the ratio is what to compare across machines.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${SECONDS_PER_RUN:-3}
swift build -c release --product wallet-crypto-bench >/dev/null 2>&1
ours=$("$(swift build -c release --show-bin-path)/wallet-crypto-bench" "$seconds" | awk '{print $2}')
theirs=$(openssl speed -seconds "$seconds" ecdhp256 2>/dev/null | awk '/256 bits ecdh \(nistp256\)/ {print $NF}')
echo "ECC_V2 encryptions/s (one core, swift-crypto): $ours"
echo "openssl speed ecdhp256 ops/s (one core):      $theirs"
python3 -c "print('ratio ECC_V2 / openssl ECDH: %.2f' % ($ours / $theirs))"
