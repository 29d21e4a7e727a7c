#!/usr/bin/env bash
# Starts `provisioning-gateway` with the sandbox config on a free port and sends the README's
# ready-made Apple Pay request for every demo card; fails unless each answers 200 with a payload.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/wait-for-gateway.sh

port=${PORT:-18080}
log=$(mktemp)
swift build --product provisioning-gateway >/dev/null
bin="$(swift build --show-bin-path)/provisioning-gateway"
"$bin" --port "$port" >"$log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true; rm -f "$log"' EXIT

wait_for_gateway $pid "$log"
head -5 "$log"

status=0
for card in card_bridge_demo card_tmp_demo card_crossmint_demo card_marqeta_demo card_lithic_demo; do
  out=$(curl -s --max-time 30 -w '\n%{http_code}' -X POST "http://127.0.0.1:$port/v1/cards/$card/wallet-provisioning/apple-pay" \
    -H 'Authorization: Bearer sk_sandbox_demo' -H 'Content-Type: application/json' \
    --data @Config/sandbox/apple-pay-request.json)
  code=$(tail -n1 <<<"$out")
  body=$(head -n -1 <<<"$out")
  if [ "$code" = 200 ] && python3 -c '
import base64, json, sys
b = json.loads(sys.argv[1])
key = base64.b64decode(b["ephemeral_public_key"])
assert len(key) == 65 and key[0] == 4, "bad key"
assert base64.b64decode(b["encrypted_pass_data"]) and base64.b64decode(b["activation_data"])
print("  %-20s -> %s  %s" % (sys.argv[2], b["issuer"], b["provisioning_id"]))
' "$body" "$card"; then :; else
    echo "  $card -> HTTP $code: $body"; status=1
  fi
done

# The README's Google Pay and token activation calls, and a fault played by the simulator.
check() {  # name, expected python assertion on the JSON body `b`, then curl arguments
  local name=$1 assertion=$2; shift 2
  local out code body
  out=$(curl -s --max-time 30 -w '\n%{http_code}' -H 'Authorization: Bearer sk_sandbox_demo' -H 'Content-Type: application/json' "$@")
  code=$(tail -n1 <<<"$out"); body=$(head -n -1 <<<"$out")
  if [ "$code" = 200 ] && python3 -c "import json, sys; b = json.loads(sys.argv[1]); assert $assertion, b" "$body"; then
    echo "  $name -> ok"
  else
    echo "  $name -> HTTP $code: $body"; status=1
  fi
}
check "google pay (tmp)" 'b["issuer"] == "tmp" and b["opaque_payment_card"] and b["last_digits"] == "4444"' \
  -X POST "http://127.0.0.1:$port/v1/cards/card_tmp_demo/wallet-provisioning/google-pay" \
  -d '{"wallet_account_id":"WLT-2bB8p0e7LmQ","device_id":"hw-6c1f0a9e2d"}'
check "google pay (marqeta)" 'b["issuer"] == "marqeta" and b["opaque_payment_card"] and b["last_digits"] == "5100"' \
  -X POST "http://127.0.0.1:$port/v1/cards/card_marqeta_demo/wallet-provisioning/google-pay" \
  -d '{"wallet_account_id":"WLT-2bB8p0e7LmQ","device_id":"hw-6c1f0a9e2d"}'
check "google pay (lithic)" 'b["issuer"] == "lithic" and b["opaque_payment_card"]' \
  -X POST "http://127.0.0.1:$port/v1/cards/card_lithic_demo/wallet-provisioning/google-pay" \
  -d '{"wallet_account_id":"WLT-2bB8p0e7LmQ","device_id":"hw-6c1f0a9e2d"}'
check "samsung pay (marqeta)" 'b["issuer"] == "marqeta" and b["provision_payload"] and b["last_digits"] == "5100"' \
  -X POST "http://127.0.0.1:$port/v1/cards/card_marqeta_demo/wallet-provisioning/samsung-pay" \
  -d '{"wallet_account_id":"SPAY-7f3a9c","device_id":"sp-dev-41e2","device":{"type":"phone"}}'
check "wallet tokens (marqeta)" 'len(b["tokens"]) == 2 and all(t["status"] == "active" for t in b["tokens"])' \
  "http://127.0.0.1:$port/v1/cards/card_marqeta_demo/wallet-tokens"
check "suspend a token (marqeta)" 'b["outcome"] == "applied" and b["status"] == "suspended"' \
  -X POST "http://127.0.0.1:$port/v1/cards/card_marqeta_demo/wallet-tokens/dwt-1-mq_card_demo_001/suspend"
check "wallet tokens (lithic)" 'len(b["tokens"]) == 2' "http://127.0.0.1:$port/v1/cards/card_lithic_demo/wallet-tokens"
check "token activation" 'b["result"] == "approved"' -X POST "http://127.0.0.1:$port/v1/token-activations" \
  -d '{"token_unique_reference":"DWSPMC000000000132d72d4fcb2f4136a0532d3093ff1a45","card_id":"card_tmp_demo"}'
check "fault queued" 'len(b["faults"]) == 1' -X POST "http://127.0.0.1:$port/v1/sandbox/faults" \
  -d '{"issuer":"bridge","mode":"unavailable","count":2}'
check "apple pay after two 503s" 'b["issuer"] == "bridge"' -X POST \
  "http://127.0.0.1:$port/v1/cards/card_bridge_demo/wallet-provisioning/apple-pay" --data @Config/sandbox/apple-pay-request.json

# The Security section's refusals: another card claiming a registered issuer reference is a 409,
# and the attempt is in the security audit that the ops key reads.
expect_status() {  # name, expected HTTP status, then curl arguments
  local name=$1 expected=$2; shift 2
  local code
  code=$(curl -s --max-time 30 -o /dev/null -w '%{http_code}' "$@")
  if [ "$code" = "$expected" ]; then echo "  $name -> $code ok"; else echo "  $name -> HTTP $code, expected $expected"; status=1; fi
}
steal="card_steal_$$_$RANDOM"   # the sandbox store persists between runs: a fresh id each time
expect_status "claiming a taken issuer reference" 409 -X PUT "http://127.0.0.1:$port/v1/cards/$steal" \
  -H 'Authorization: Bearer sk_sandbox_demo' -H 'Content-Type: application/json' \
  -d '{"issuer":"tmp","program":"demo","issuer_reference":{"issuer_card_id":"tmp_card_demo_001"}}'
expect_status "a tenant naming issuer local" 403 -X PUT "http://127.0.0.1:$port/v1/cards/card_bridge_demo" \
  -H 'Authorization: Bearer sk_sandbox_demo' -H 'Content-Type: application/json' -d '{"issuer":"local","program":"demo","issuer_reference":{}}'
expect_status "an admin key provisioning" 403 -X POST "http://127.0.0.1:$port/v1/cards/card_bridge_demo/wallet-provisioning/apple-pay" \
  -H 'Authorization: Bearer sk_sandbox_ops' -H 'Content-Type: application/json' --data @Config/sandbox/apple-pay-request.json
audit=$(curl -s --max-time 30 "http://127.0.0.1:$port/v1/admin/audit?kind=card_change_refused&card_id=$steal" \
  -H 'Authorization: Bearer sk_sandbox_ops')
if python3 -c 'import json, sys; e = json.loads(sys.argv[1])["events"]; assert [(x["actor"], x["detail"]["reason"]) for x in e] == [("demo", "reference_in_use")], e' "$audit"; then
  echo "  security audit -> ok"
else
  echo "  security audit -> $audit"; status=1
fi
exit $status
