#!/usr/bin/env bash
# The API contract, tried by schemathesis (https://schemathesis.readthedocs.io) with every check
# against a sandbox gateway built from this tree (about 4 minutes a seed: schemathesis fuzzes until
# its time budget is spent): the served /openapi.yaml must describe exactly
# what the server accepts and answers. schemathesis.toml (at the top of the repository) says which
# statuses count as business answers and why.
#
#   bash scripts/contract-check.sh            # a fixed seed, then a random one (printed)
#   ST_SEED=1234 bash scripts/contract-check.sh  # replay one seed
#   ST_MAX_EXAMPLES=50 bash scripts/contract-check.sh
#
# Installs schemathesis from PyPI when it is missing. Runs the executable `swift build` made.
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -c "import schemathesis" 2>/dev/null || python3 -m pip install -q "schemathesis>=4.3,<5"
python3 -c "import openapi_spec_validator" 2>/dev/null || python3 -m pip install -q openapi-spec-validator

# The document as a YAML 1.1 reader (PyYAML, as most generators in other languages) takes it: a
# bare `on` had been read as `true` and made it invalid there, while the Swift side read a string.
python3 - <<'PY'
import yaml
from openapi_spec_validator import validate
validate(yaml.safe_load(open("Sources/ProvisioningAPI/openapi.yaml")))
print("openapi.yaml: a valid OpenAPI document to a YAML 1.1 reader (PyYAML, openapi-spec-validator)")
PY
bin="$(swift build --show-bin-path)/provisioning-gateway"
[ -x "$bin" ] || swift build --product provisioning-gateway

work="$(mktemp -d)"
gateway_pid=""
cleanup() { [ -n "$gateway_pid" ] && kill "$gateway_pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

# The sandbox file, with the demo client's rate limit and the failed-authentication limit raised:
# schemathesis sends thousands of requests a minute, and `ignored_auth` sends many without a key on
# purpose. Both limits keep their own tests (Tests/GatewayServerTests/RateLimitTests.swift).
ln -s "$PWD/Config/sandbox" "$work/sandbox"
python3 - "$work/gateway.yaml" <<'PY'
import sys, yaml
config = yaml.safe_load(open("Config/gateway.yaml"))
unlimited = {"requests_per_second": 100000, "burst": 100000}
config["server"]["auth_failure_limit"] = unlimited
for client in config["clients"]:
    client["rate_limit"] = unlimited
yaml.safe_dump(config, open(sys.argv[1], "w"), sort_keys=False)
PY

port="${ST_PORT:-18097}"
source scripts/wait-for-gateway.sh
"$bin" serve --config "$work/gateway.yaml" --port "$port" > "$work/gateway.log" 2>&1 &
gateway_pid=$!
wait_for_gateway "$gateway_pid" "$work/gateway.log"

max_examples="${ST_MAX_EXAMPLES:-15}"
run() {
  local seed="$1"; shift
  echo "schemathesis: seed $seed, at most $max_examples examples per operation $*"
  if ! st --config-file schemathesis.toml run "http://127.0.0.1:$port/openapi.yaml" \
      --seed "$seed" --max-examples "$max_examples" "$@"; then
    echo "schemathesis failed with seed $seed: replay with ST_SEED=$seed bash scripts/contract-check.sh" >&2
    tail -50 "$work/gateway.log" >&2
    return 1
  fi
}
# Fault injection queues faults at the simulators that later provisionings would meet: the fault
# routes run on their own, after everything else.
seeds=("${ST_SEED:-20261122}")
[ -z "${ST_SEED:-}" ] && seeds+=("$RANDOM$RANDOM")
for seed in "${seeds[@]}"; do
  run "$seed" --exclude-path /v1/sandbox/faults
  # No stateful phase here: every link of the document leads outside these three operations.
  run "$seed" --include-path /v1/sandbox/faults --phases examples,coverage,fuzzing --max-time 45
done
echo "schemathesis: no failures"
