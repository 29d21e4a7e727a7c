#!/usr/bin/env bash
# Interop: a fresh sandbox device asks the running gateway for each demo card's payload, and an
# independent implementation (Python's `cryptography`) decrypts it following WALLET-CRYPTO.md.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/wait-for-gateway.sh

port=${PORT:-18081}
swift build --product provisioning-gateway >/dev/null
bin="$(swift build --show-bin-path)/provisioning-gateway"
work=$(mktemp -d)
"$bin" sandbox device --out "$work/device" >/dev/null
"$bin" --port "$port" >"$work/gateway.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true; rm -rf "$work"' EXIT
wait_for_gateway $pid "$work/gateway.log"

status=0
while read -r card pan; do
  curl -s --max-time 30 -X POST "http://127.0.0.1:$port/v1/cards/$card/wallet-provisioning/apple-pay" \
    -H 'Authorization: Bearer sk_sandbox_demo' -H 'Content-Type: application/json' \
    --data @"$work/device/apple-pay-request.json" >"$work/$card.json"
  python3 scripts/ecc_v2_decrypt.py "$work/device/leaf-key.pem" "$work/$card.json" "$work/device/apple-pay-request.json" "$pan" || status=1
done <<'CARDS'
card_local_demo 4242424242424242
card_bridge_demo 4111111111111111
card_tmp_demo 5555555555554444
card_crossmint_demo 4000056655665556
card_marqeta_demo 5105105105105100
card_lithic_demo 4012888888881881
CARDS
exit $status
