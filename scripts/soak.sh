#!/usr/bin/env bash
# Soak: starts the sandbox gateway (Config/gateway.yaml, its default timeouts and retry policy) on
# a free port with a throwaway SQLite store, then runs gateway-soak against it: provisionings for
# the Bridge, TMP and Crossmint demo cards while random faults are queued at the simulators.
# Prints success rate, p50/p99 latency and upstream attempts per request, and the gateway's
# resident memory before and after. Arguments go to gateway-soak (e.g. --requests 5000).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/wait-for-gateway.sh

port=${PORT:-18090}
config=${CONFIG:-release}
work=$(mktemp -d)
swift build -c "$config" --product provisioning-gateway >/dev/null
swift build -c "$config" --product gateway-soak >/dev/null
bin="$(swift build -c "$config" --show-bin-path)"
sed "s|^store:.*||" Config/gateway.yaml > "$work/gateway.yaml"
cp -r Config/sandbox "$work/sandbox"
printf 'store:\n  sqlite:\n    path: %s/gateway.sqlite\n' "$work" >> "$work/gateway.yaml"
"$bin/provisioning-gateway" --config "$work/gateway.yaml" --port "$port" --log-level warning >"$work/gateway.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true; rm -rf "$work"' EXIT
wait_for_gateway $pid "$work/gateway.log"
rss() { awk '/VmRSS/ {printf "%.0f MiB", $2/1024}' "/proc/$pid/status"; }
echo "gateway ($config build) resident at start: $(rss)"
"$bin/gateway-soak" --url "http://127.0.0.1:$port" "$@"
echo "gateway resident after the soak: $(rss)"
