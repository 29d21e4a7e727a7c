#!/usr/bin/env bash
# The gateway beside nginx, in one run on this machine (README, "Performance"):
#   1. wrk -> nginx serving Bridge's documented Apple Pay answer (a static body), directly;
#   2. wrk -> nginx proxy_pass -> that static answer;
#   3. wrk -> the gateway (release build, a throwaway SQLite store, one registered Bridge card)
#      -> that static answer, as Bridge, without and with a fresh Idempotency-Key per request;
#   4. wrk -> the gateway's GET /healthz: the floor (listener, middleware, generated server code);
# each at 1 and 16 connections. Prints requests/s, p50 and p99, the ratios the README's targets
# are written in, the gateway's CPU per request, its context switches and system calls per request
# (`perf stat`, when perf is installed and may attach; not with PERF_DIR, whose profiling would be
# counted) and its resident memory. Then `request-path-bench`: the microseconds per call of the request path's
# own CPU-bound steps (the request-contract check), one core, no network.
#
#   DURATION=10 (seconds per run), CONNECTIONS=16, PORT_BASE=18300, CONFIG=release,
#   PERF_DIR=dir (a `perf record -g` profile of the gateway per gateway run, for `perf report -i`),
#   GATEWAY_BIN=path (a gateway binary built beforehand, e.g. an earlier commit's, instead of
#   building this checkout: two binaries measured one after the other on the same machine),
#   TRAITS=Jemalloc (the package traits of the builds; TRAITS= for the C library's malloc),
#   BASELINE_BIN=path (paired mode: a second gateway binary, say the previous commit's build, runs
#   beside this checkout's on its own port and store; wrk alternates between the two, ROUNDS=4
#   rounds of DURATION-second bursts, unkeyed and keyed, at CONNECTIONS and 1, the order swapped
#   every round; prints each one's CPU, context switches and system calls per request, requests/s,
#   p50 and p99, and candidate/baseline ratios, instead of the nginx table),
#   GATEWAY_ARGS / BASELINE_ARGS (extra arguments to the gateway's / the baseline's `serve`, e.g.
#   GATEWAY_ARGS="--executor event-loops" BASELINE_BIN=<the same binary> weighs the two executors)
# Installs nginx and wrk (and libjemalloc-dev for TRAITS=Jemalloc) from Debian's packages when they
# are missing (apt-get, as root).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/wait-for-gateway.sh

duration=${DURATION:-10}
connections=${CONNECTIONS:-16}
base=${PORT_BASE:-18300}
config=${CONFIG:-release}
static_port=$base proxy_port=$((base + 1)) gateway_port=$((base + 2)) nio_port=$((base + 3)) hummingbird_port=$((base + 4)) upstream_floor_port=$((base + 5))

if ! command -v nginx >/dev/null || ! command -v wrk >/dev/null; then
    if [ "$(id -u)" = 0 ]; then
        apt-get update -q >/dev/null
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q nginx-light wrk >/dev/null
    else
        echo "nginx and wrk are needed: apt-get install nginx-light wrk (as root)" >&2
        exit 1
    fi
fi
nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)

# The package traits the gateway, the floor proxies and request-path-bench are built with: by
# default Jemalloc, as a production build (README, "A production build"), with Debian's
# libjemalloc-dev installed when missing; TRAITS= builds them on the C library's malloc.
traits=${TRAITS-Jemalloc}
trait_flags=()
if [ -n "$traits" ]; then
    trait_flags=(--traits "$traits")
    if [[ ",$traits," == *,Jemalloc,* ]] && [ ! -e /usr/include/jemalloc/jemalloc.h ]; then
        if [ "$(id -u)" = 0 ]; then
            apt-get update -q >/dev/null
            DEBIAN_FRONTEND=noninteractive apt-get install -y -q libjemalloc-dev >/dev/null
        else
            echo "the Jemalloc trait needs libjemalloc-dev: apt-get install libjemalloc-dev (as root), or run with TRAITS=" >&2
            exit 1
        fi
    fi
fi

if [ -n "${GATEWAY_BIN:-}" ]; then
    gateway_bin=$GATEWAY_BIN
else
    swift build -c "$config" "${trait_flags[@]}" --product provisioning-gateway >/dev/null 2>&1 || swift build -c "$config" "${trait_flags[@]}" --product provisioning-gateway
    gateway_bin="$(swift build -c "$config" --show-bin-path 2>/dev/null)/provisioning-gateway"
fi
# The stack's floor (Sources/proxy-floor): the same forwarding with nothing else, on SwiftNIO alone,
# on Hummingbird with AsyncHTTPClient (the gateway's stack until its connectors moved off it), and
# on Hummingbird with the connectors' own UpstreamHTTP (the gateway's stack).
swift build -c "$config" "${trait_flags[@]}" --product proxy-floor >/dev/null 2>&1 || swift build -c "$config" "${trait_flags[@]}" --product proxy-floor
swift build -c "$config" "${trait_flags[@]}" --product request-path-bench >/dev/null 2>&1 || swift build -c "$config" "${trait_flags[@]}" --product request-path-bench
floor_bin="$(swift build -c "$config" --show-bin-path 2>/dev/null)/proxy-floor"

work=$(mktemp -d)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    [ -f "$work/nginx.pid" ] && kill "$(cat "$work/nginx.pid")" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

# Bridge's answer as its guide documents it (Tests/IssuersTests/Fixtures, verbatim), on one line.
answer=$(python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1])), separators=(",", ":")))' \
    Tests/IssuersTests/Fixtures/bridge-apple-pay-response.json)
mkdir -p "$work/nginx"
cat >"$work/nginx.conf" <<EOF
worker_processes auto;
pid $work/nginx.pid;
error_log $work/nginx/error.log warn;
daemon on;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path $work/nginx/body;
    proxy_temp_path $work/nginx/proxy;
    fastcgi_temp_path $work/nginx/fastcgi;
    uwsgi_temp_path $work/nginx/uwsgi;
    scgi_temp_path $work/nginx/scgi;
    keepalive_requests 1000000;
    upstream static_answer { server 127.0.0.1:$static_port; keepalive 64; }
    server {
        listen 127.0.0.1:$static_port;
        location / { default_type application/json; return 200 '$answer'; }
    }
    server {
        listen 127.0.0.1:$proxy_port;
        location / {
            proxy_pass http://static_answer;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }
    }
}
EOF
"$nginx_bin" -c "$work/nginx.conf" -p "$work/nginx" 2>/dev/null
for _ in $(seq 50); do curl -sf -o /dev/null -X POST "http://127.0.0.1:$proxy_port/v0/x" && break; sleep 0.1; done

# The gateway: one client (its key only in this run's environment), Bridge at the static answer.
bench_key="sk_bench_$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
admin_key="sk_bench_admin_$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
sha() { printf '%s' "$1" | sha256sum | cut -d' ' -f1; }
export BENCH_BRIDGE_API_KEY="bench-$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n')"
export BENCH_VAULT_KEY="$(head -c 32 /dev/urandom | base64)"
cat >"$work/gateway.yaml" <<EOF
server:
  host: 127.0.0.1
  port: $gateway_port
clients:
  - id: bench
    api_key_sha256: $(sha "$bench_key")
    programs: [bench]
    rate_limit: { requests_per_second: 100000, burst: 100000 }
  - id: admin
    api_key_sha256: $(sha "$admin_key")
    admin: true
    rate_limit: { requests_per_second: 100000, burst: 100000 }
issuers:
  bridge:
    kind: bridge
    endpoints:
      - url: http://127.0.0.1:$static_port/v0
    credentials:
      api_key: env:BENCH_BRIDGE_API_KEY
vault:
  key: env:BENCH_VAULT_KEY
store:
  sqlite:
    path: $work/gateway.sqlite
EOF
body_file=Config/sandbox/apple-pay-request.json
# start_gateway BINARY CONFIG NAME [ARGUMENTS...]: starts a gateway with those extra arguments to
# `serve` (its pid in started_pid), registers the bench card through its API and checks that one
# provisioning goes through the static answer.
start_gateway() {
    local binary=$1 config_file=$2 name=$3 port
    shift 3
    port=$(awk '/^  port: / {print $2; exit}' "$config_file")
    "$binary" --config "$config_file" --log-level warning "$@" >"$work/$name.log" 2>&1 &
    started_pid=$!
    pids+=("$started_pid")
    wait_for_gateway "$started_pid" "$work/$name.log"
    curl -sf -o /dev/null -X PUT "http://127.0.0.1:$port/v1/cards/card_bench_1" \
        -H "Authorization: Bearer $admin_key" -H 'Content-Type: application/json' \
        -d '{"issuer":"bridge","program":"bench","issuer_reference":{"customer_id":"cust_bench","card_account_id":"ca_bench"}}'
    local status
    status=$(curl -s -o "$work/first-$name.json" -w '%{http_code}' -X POST "http://127.0.0.1:$port/v1/cards/card_bench_1/wallet-provisioning/apple-pay" \
        -H "Authorization: Bearer $bench_key" -H 'Content-Type: application/json' --data-binary "@$body_file")
    if [ "$status" != 200 ]; then
        echo "the $name ($binary) did not provision through the static answer (HTTP $status):" >&2
        cat "$work/first-$name.json" >&2; tail -20 "$work/$name.log" >&2
        exit 1
    fi
}
# GATEWAY_ARGS / BASELINE_ARGS: extra arguments to each one's `serve` (e.g. "--executor event-loops").
read -r -a gateway_args <<<"${GATEWAY_ARGS:-}"
read -r -a baseline_args <<<"${BASELINE_ARGS:-}"
start_gateway "$gateway_bin" "$work/gateway.yaml" gateway "${gateway_args[@]}"
gateway_pid=$started_pid

# The baseline gateway of the paired mode (BASELINE_BIN): the same config on its own port and store.
baseline_pid=
if [ -n "${BASELINE_BIN:-}" ]; then
    baseline_port=$((base + 6))
    sed -e "s/^  port: $gateway_port\$/  port: $baseline_port/" -e "s#$work/gateway.sqlite#$work/baseline.sqlite#" \
        "$work/gateway.yaml" >"$work/baseline.yaml"
    start_gateway "$BASELINE_BIN" "$work/baseline.yaml" baseline "${baseline_args[@]}"
    baseline_pid=$started_pid
else
    "$floor_bin" nio "$nio_port" "$static_port" >"$work/floor-nio.log" 2>&1 &
    nio_pid=$!
    pids+=("$nio_pid")
    "$floor_bin" hummingbird "$hummingbird_port" "$static_port" >"$work/floor-hummingbird.log" 2>&1 &
    hummingbird_pid=$!
    pids+=("$hummingbird_pid")
    "$floor_bin" hummingbird-upstream "$upstream_floor_port" "$static_port" >"$work/floor-hummingbird-upstream.log" 2>&1 &
    upstream_floor_pid=$!
    pids+=("$upstream_floor_pid")
    floor_path=/v1/cards/card_bench_1/wallet-provisioning/apple-pay
    for port in "$nio_port" "$hummingbird_port" "$upstream_floor_port"; do
        for _ in $(seq 100); do
            curl -sf -o /dev/null -X POST "http://127.0.0.1:$port$floor_path" -H 'Content-Type: application/json' --data-binary "@$body_file" && break
            sleep 0.1
        done
        curl -sf -o /dev/null -X POST "http://127.0.0.1:$port$floor_path" -H 'Content-Type: application/json' --data-binary "@$body_file" || {
            echo "proxy-floor on port $port did not forward:" >&2; cat "$work"/floor-*.log >&2; exit 1; }
    done
fi

if [ -n "${HOLD:-}" ]; then
    # Keeps everything running for a look by hand (Ctrl-C to stop).
    echo "gateway: http://127.0.0.1:$gateway_port (pid $gateway_pid), key $bench_key; log $work/gateway.log"
    [ -n "$baseline_pid" ] && echo "baseline: http://127.0.0.1:$baseline_port (pid $baseline_pid); log $work/baseline.log"
    echo "curl -s -X POST http://127.0.0.1:$gateway_port/v1/cards/card_bench_1/wallet-provisioning/apple-pay -H 'Authorization: Bearer $bench_key' -H 'Content-Type: application/json' --data-binary @$body_file"
    sleep infinity
fi

# wrk's request: the sandbox device's Apple Pay body; with KEYED=1 a fresh Idempotency-Key each time.
python3 - "$body_file" "$work/post.lua" <<'PY'
import json, sys
body = json.dumps(json.load(open(sys.argv[1])), separators=(",", ":"))
open(sys.argv[2], "w").write(f"""
wrk.method = "POST"
wrk.body = {json.dumps(body)}
wrk.headers["Content-Type"] = "application/json"
local keyed = os.getenv("KEYED") == "1"
local auth = os.getenv("BENCH_AUTH")
if auth then wrk.headers["Authorization"] = auth end
-- Each wrk thread has its own Lua state: setup() numbers them, so their keys never collide.
local threads = 0
function setup(thread)
  thread:set("tid", threads)
  threads = threads + 1
end
local n = 0
local prefix
request = function()
  if not prefix then
    prefix = string.format("bench-%s-%d-%d", os.getenv("RUN_ID") or "0", tid or 0, os.time())
    math.randomseed(os.time() + 7919 * (tid or 0))
  end
  if not keyed then return wrk.format() end
  n = n + 1
  -- wrk.format's headers replace wrk.headers: copy them, then add the key. Random leading digits,
  -- as a client's UUIDs have (the store's key index then grows at random places, as it does in
  -- production, not at its end); the thread's prefix and counter keep every key apart.
  local headers = {{}}
  for name, value in pairs(wrk.headers) do headers[name] = value end
  -- A letter first: 16 random hex digits that happen to be all decimal would read as a card number
  -- one time in ten (about once in 20,000 keys), which the gateway refuses.
  headers["Idempotency-Key"] = string.format("k%08x%08x-", math.random(0, 0x7fffffff), math.random(0, 0x7fffffff)) .. prefix .. "-" .. n
  return wrk.format(nil, nil, headers)
end
""")
PY

# The floor: GET /healthz runs the same listener, middleware and generated server code, and
# touches neither the store nor an upstream.
echo 'wrk.method = "GET"' >"$work/get.lua"

# The process a run measures: the gateway, or the floor's proxy the run is sent to (none for nginx,
# whose two servers share their workers).
measured_pid() {
    case $1 in
        gateway*|candidate*) echo "$gateway_pid" ;;
        baseline*) echo "$baseline_pid" ;;
        "floor: SwiftNIO"*) echo "$nio_pid" ;;
        "floor: Hummingbird + UpstreamHTTP"*) echo "$upstream_floor_pid" ;;
        "floor: Hummingbird"*) echo "$hummingbird_pid" ;;
    esac
}
cpu_ticks() { if [ -n "$1" ]; then awk '{print $14 + $15}' "/proc/$1/stat"; else echo 0; fi; }
# The machine's steal and total ticks (/proc/stat): on a shared VM, time the hypervisor gave to
# other guests. A run with much steal has slower, noisier figures than one without.
machine_ticks() { awk '/^cpu / {total = 0; for (i = 2; i <= NF; i++) total += $i; print $9, total}' /proc/stat; }
# The share of the machine's CPU stolen since `read -r steal_start total_start < <(machine_ticks)`, in %.
steal_percent_since_start() {
    local steal_end total_end
    read -r steal_end total_end < <(machine_ticks)
    echo $(( (steal_end - steal_start) * 100 / (total_end - total_start > 0 ? total_end - total_start : 1) ))
}
ticks_per_second=$(getconf CLK_TCK)
perf_stat=
# Attaching to a running process is what the runs do, so that is what is tried.
if command -v perf >/dev/null && perf stat -x, -e context-switches -p $$ -- sleep 0.1 >/dev/null 2>&1; then perf_stat=1; fi
# And its system calls (the raw_syscalls:sys_enter tracepoint, counted, not recorded), where the
# kernel lets perf use tracepoints.
stat_events=context-switches
if [ -n "$perf_stat" ] && perf stat -x, -e raw_syscalls:sys_enter -p $$ -- sleep 0.1 >/dev/null 2>&1; then
    stat_events=context-switches,raw_syscalls:sys_enter
fi
results="$work/results.tsv"
# The SQLite store's group commit, as the gateway's /metrics counts it (README, "Upstream health
# and metrics"): its synced commits and the writes they held; "- -" from a gateway without them.
commits="$work/commits.tsv"
store_commits() {
    curl -sf -H "Authorization: Bearer $admin_key" "http://127.0.0.1:$gateway_port/metrics" 2>/dev/null |
        awk '$1 == "gateway_store_commits_total" {c = $2} $1 == "gateway_store_committed_writes_total" {w = $2}
             END {print (c == "" ? "-" : c), (w == "" ? "-" : w)}'
}
run_id=$RANDOM
# run NAME URL CONNECTIONS [KEYED] [AUTH]: one wrk run, one line of results.
run() {
    local name=$1 url=$2 conns=$3 keyed=${4:-0} auth=${5:-}
    local threads=$(( conns < 2 ? 1 : 2 ))
    local before after out
    local perf_pid= pid
    pid=$(measured_pid "$name")
    if [ -n "${PERF_DIR:-}" ] && [ -n "$pid" ]; then
        mkdir -p "$PERF_DIR"
        perf record -e cpu-clock -g -p "$pid" -o "$PERF_DIR/$(echo "$name-$conns" | tr -c 'a-zA-Z0-9-' '_').data" >/dev/null 2>&1 &
        perf_pid=$!
        sleep 0.5
    fi
    # The gateway's context switches over the run (`perf stat`'s software counter, which needs no
    # hardware PMU and counts threads that exit too): each one is a thread put to sleep or woken,
    # so per request they count the hand-offs between threads, a figure the machine's noise
    # barely moves; and its system calls, as steady. Skipped when perf is missing or refused.
    local stat_pid= stat_file="$work/switches.$run_id"
    if [ -z "$perf_pid" ] && [ -n "$pid" ] && [ -n "$perf_stat" ]; then
        perf stat -x, -e "$stat_events" -p "$pid" -o "$stat_file" >/dev/null 2>&1 &
        stat_pid=$!
        sleep 0.3
    fi
    local commits_before= writes_before= commits_after= writes_after=
    if [[ $name == "gateway -> "* ]]; then read -r commits_before writes_before < <(store_commits); fi
    before=$(cpu_ticks "$pid")
    run_id=$((run_id + 1))
    local script="$work/post.lua"
    [[ $name == *healthz* ]] && script="$work/get.lua"
    local measured=$(( ${#pid} > 0 ))
    out=$(RUN_ID=$run_id KEYED=$keyed BENCH_AUTH="$auth" wrk -t"$threads" -c"$conns" -d"${duration}s" --latency -s "$script" "$url")
    after=$(cpu_ticks "$pid")
    if [[ $name == "gateway -> "* ]]; then
        read -r commits_after writes_after < <(store_commits)
        printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$conns" "$commits_before" "$writes_before" "$commits_after" "$writes_after" >>"$commits"
    fi
    if [ -n "$perf_pid" ]; then kill -INT "$perf_pid" 2>/dev/null || true; wait "$perf_pid" || true; fi
    local switches= syscalls=
    if [ -n "$stat_pid" ]; then
        kill -INT "$stat_pid" 2>/dev/null || true
        wait "$stat_pid" || true
        # `context-switches:u` where perf may count only user space (a non-root caller).
        switches=$(awk -F, '$3 ~ /^context-switches/ {print $1}' "$stat_file" 2>/dev/null || true)
        syscalls=$(awk -F, '$3 ~ /^raw_syscalls:sys_enter/ {print $1}' "$stat_file" 2>/dev/null || true)
    fi
    WRK_OUT="$out" python3 - "$name" "$conns" "$((after - before))" "$ticks_per_second" "$switches" "$syscalls" "$measured" >>"$results" <<'PY'
import os, re, sys
name, conns, ticks, hz, switches, syscalls, measured = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6], sys.argv[7]
out = os.environ["WRK_OUT"]
def ms(text):
    value, unit = re.match(r"([\d.]+)(us|ms|s)", text).groups()
    return float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]
rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
total = int(re.search(r"(\d+) requests in", out).group(1))
p50 = ms(re.search(r"^\s+50%\s+(\S+)", out, re.M).group(1))
p99 = ms(re.search(r"^\s+99%\s+(\S+)", out, re.M).group(1))
non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
errors = re.search(r"Socket errors: (.*)", out)
print("\t".join([name, conns, f"{rps:.0f}", f"{p50:.3f}", f"{p99:.3f}", str(total), str(ticks / hz * 1000),
                 non2xx.group(1) if non2xx else "0", errors.group(1) if errors else "",
                 switches if switches.isdigit() else "", syscalls if syscalls.isdigit() else "", measured]))
PY
}

auth="Bearer $bench_key"
gateway_url="http://127.0.0.1:$gateway_port/v1/cards/card_bench_1/wallet-provisioning/apple-pay"
rss_start=$(awk '/VmRSS/ {print $2}' "/proc/$gateway_pid/status")
# Which allocator the gateway runs on: jemalloc when its library is mapped and start-up found it
# serving malloc (else the gateway logged a warning naming the allocator).
if grep -q libjemalloc "/proc/$gateway_pid/maps" && ! grep -q "allocator:" "$work/gateway.log"; then
    allocator=jemalloc
else
    allocator="the C library's malloc"
    grep "allocator:" "$work/gateway.log" >&2 || true
    if [ -z "${GATEWAY_BIN:-}" ] && [[ ",$traits," == *,Jemalloc,* ]]; then
        echo "built with the Jemalloc trait, but the gateway does not run on jemalloc" >&2
        exit 1
    fi
fi
if [ -n "${BASELINE_BIN:-}" ]; then
    # Paired mode: the baseline and this checkout's gateway (the candidate) take turns, one burst
    # each per case and round, the order swapped every round, so the machine's drift over minutes
    # falls on both alike; the per-round figures show whether a difference holds in every round.
    rounds=${ROUNDS:-4}
    baseline_url="http://127.0.0.1:$baseline_port/v1/cards/card_bench_1/wallet-provisioning/apple-pay"
    read -r steal_start total_start < <(machine_ticks)
    for round in $(seq "$rounds"); do
        for conns in "$connections" 1; do
            for keyed in 0 1; do
                case_name="$([ "$keyed" = 1 ] && echo keyed || echo unkeyed), $conns connection$([ "$conns" = 1 ] || echo s)"
                if (( round % 2 )); then order=(baseline candidate); else order=(candidate baseline); fi
                for who in "${order[@]}"; do
                    url=$gateway_url
                    [ "$who" = baseline ] && url=$baseline_url
                    run "$who: $case_name" "$url" "$conns" "$keyed" "$auth"
                done
            done
        done
    done
    steal_percent=$(steal_percent_since_start)
    python3 - "$results" "$duration" "$rounds" "$steal_percent" "$allocator" "$config" "$BASELINE_BIN" <<'PY'
import statistics, sys
rows = [line.rstrip("\n").split("\t") for line in open(sys.argv[1])]
duration, rounds, steal, allocator, config, baseline = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), *sys.argv[5:8]
runs = {}
for name, conns, rps, p50, p99, total, cpu_ms, non2xx, errors, switches, syscalls, measured in rows:
    who, case = name.split(": ", 1)
    total = int(total)
    runs.setdefault((case, who), []).append(dict(
        rps=float(rps), p50=float(p50), p99=float(p99), cpu=float(cpu_ms) / max(total, 1),
        switches=int(switches) / max(total, 1) if switches else None,
        syscalls=int(syscalls) / max(total, 1) if syscalls else None, non2xx=int(non2xx)))
print(f"\npaired runs: baseline {baseline} against this checkout's {config} gateway (candidate), on {allocator};")
print(f"{rounds} rounds of {duration} s bursts, the order swapped every round; {steal} % of the machine's CPU stolen\n")
print("| case | figure | baseline | candidate | candidate / baseline | candidate better in rounds |")
print("|---|---|---|---|---|---|")
figures = (("CPU per request (ms)", "cpu", "{:.3f}", True), ("context switches per request", "switches", "{:.2f}", True),
           ("system calls per request", "syscalls", "{:.1f}", True), ("requests/s", "rps", "{:,.0f}", False),
           ("p50 (ms)", "p50", "{:.2f}", True), ("p99 (ms)", "p99", "{:.2f}", True))
cases = list(dict.fromkeys(case for case, _ in runs))
for case in cases:
    base, cand = runs[(case, "baseline")], runs[(case, "candidate")]
    for label, key, fmt, lower_better in figures:
        if base[0][key] is None or cand[0][key] is None:
            continue
        b, c = statistics.mean(r[key] for r in base), statistics.mean(r[key] for r in cand)
        # Rounds are paired by their position: round i's baseline burst beside round i's candidate
        # burst; better is lower, but for requests/s.
        better = sum(1 for rb, rc in zip(base, cand) if (rc[key] < rb[key]) == lower_better and rc[key] != rb[key])
        print(f"| {case} | {label} | {fmt.format(b)} | {fmt.format(c)} | {c / b if b else float('nan'):.3f} | {better} of {len(base)} |")
print("\nCPU per request by round (ms), baseline / candidate:")
for case in cases:
    pairs = ", ".join(f"{rb['cpu']:.3f} / {rc['cpu']:.3f}" for rb, rc in zip(runs[(case, "baseline")], runs[(case, "candidate")]))
    print(f"  {case}: {pairs}")
bad = sum(r["non2xx"] for rs in runs.values() for r in rs)
if bad:
    print(f"WARNING: {bad} answers were not 2xx: the figures above are not provisionings")
    sys.exit(1)
PY
    exit 0
fi

read -r steal_start total_start < <(machine_ticks)
for conns in "$connections" 1; do
    run "nginx static answer, direct" "http://127.0.0.1:$static_port/v0/x" "$conns"
    run "nginx proxy_pass -> static answer" "http://127.0.0.1:$proxy_port/v0/x" "$conns"
    run "floor: SwiftNIO proxy -> static answer" "http://127.0.0.1:$nio_port$floor_path" "$conns"
    run "floor: Hummingbird + AsyncHTTPClient proxy -> static answer" "http://127.0.0.1:$hummingbird_port$floor_path" "$conns"
    run "floor: Hummingbird + UpstreamHTTP proxy -> static answer" "http://127.0.0.1:$upstream_floor_port$floor_path" "$conns"
    run "gateway GET /healthz (no store, no upstream)" "http://127.0.0.1:$gateway_port/healthz" "$conns"
    run "gateway -> static answer (no Idempotency-Key)" "$gateway_url" "$conns" 0 "$auth"
    run "gateway -> static answer (fresh Idempotency-Key)" "$gateway_url" "$conns" 1 "$auth"
done
steal_percent=$(steal_percent_since_start)
rss_end=$(awk '/VmRSS/ {print $2}' "/proc/$gateway_pid/status")
rss_peak=$(awk '/VmHWM/ {print $2}' "/proc/$gateway_pid/status")

python3 - "$results" "$duration" "$rss_start" "$rss_end" "$rss_peak" "$connections" "$steal_percent" "$allocator" "$config" "$commits" <<'PY'
import os, sys
rows = [line.rstrip("\n").split("\t") for line in open(sys.argv[1])]
duration, rss_start, rss_end, rss_peak, many, steal = sys.argv[2], *map(int, sys.argv[3:6]), sys.argv[6], int(sys.argv[7])
allocator, config = sys.argv[8], sys.argv[9]
print(f"\n{duration} s per run, wrk --latency; {config} gateway on {allocator}, SQLite store\n")
print("| path | connections | requests/s | p50 | p99 | gateway CPU per request | gateway context switches per request | gateway system calls per request |")
print("|---|---|---|---|---|---|---|---|")
by = {}
for name, conns, rps, p50, p99, total, cpu_ms, non2xx, errors, switches, syscalls, measured in rows:
    by[(name, conns)] = dict(rps=float(rps), p50=float(p50), p99=float(p99), total=int(total), cpu=float(cpu_ms), non2xx=int(non2xx))
    flag = f" ({non2xx} non-2xx)" if int(non2xx) else ""
    cpu_each = f"{float(cpu_ms) / int(total):.2f} ms" if measured == "1" and int(total) else ""
    switches_each = f"{int(switches) / int(total):.1f}" if switches and int(total) else ""
    syscalls_each = f"{int(syscalls) / int(total):.1f}" if syscalls and int(total) else ""
    print(f"| {name} | {conns} | {float(rps):,.0f}{flag} | {float(p50):.2f} ms | {float(p99):.2f} ms | {cpu_each} | {switches_each} | {syscalls_each} |")
g, gk, px = "gateway -> static answer (no Idempotency-Key)", "gateway -> static answer (fresh Idempotency-Key)", "nginx proxy_pass -> static answer"
def combined(*names):
    """The CPU target's formula: the runs' CPU together over their requests together, at both connection counts."""
    cpu = sum(by[(n, c)]["cpu"] for n in names for c in (many, "1"))
    count = sum(by[(n, c)]["total"] for n in names for c in (many, "1"))
    return cpu, count
cpu, count = combined(g, gk)
print()
print(f"gateway / nginx proxy_pass throughput ({many} connections): {by[(g, many)]['rps'] / by[(px, many)]['rps']:.3f}x   (target >= 0.25)")
print(f"gateway CPU per provisioning: {cpu / count:.3f} ms   ({cpu / 1000:.1f} s of CPU for {count} requests; target <= 0.15)")
print(f"added p50 over nginx proxy_pass, 1 connection: {by[(g, '1')]['p50'] - by[(px, '1')]['p50']:.3f} ms   (target <= 0.3)")
print(f"added p99 over nginx proxy_pass, 1 connection: {by[(g, '1')]['p99'] - by[(px, '1')]['p99']:.3f} ms   (target <= 1)")
print(f"Idempotency-Key cost ({many} connections): {by[(g, many)]['rps'] / by[(gk, many)]['rps'] - 1:+.1%} time per request   (target <= 30 %)")
hz = "gateway GET /healthz (no store, no upstream)"
print(f"the floor, GET /healthz: {by[(hz, many)]['cpu'] / max(by[(hz, many)]['total'], 1):.3f} ms CPU per request at {many} connections, "
      f"{by[(hz, '1')]['cpu'] / max(by[(hz, '1')]['total'], 1):.3f} ms at 1")
print(f"CPU time stolen by the hypervisor during the runs: {steal} % of the machine's (above a few %, compare only ratios within this run)")
print(f"gateway resident memory: {rss_start / 1024:.0f} MiB at start, {rss_end / 1024:.0f} MiB at the end, {rss_peak / 1024:.0f} MiB peak   (target < 150)")
def per_request(name, conns):
    row = by[(name, conns)]
    return row["cpu"] / max(row["total"], 1)
nio, hb = "floor: SwiftNIO proxy -> static answer", "floor: Hummingbird + AsyncHTTPClient proxy -> static answer"
hbu = "floor: Hummingbird + UpstreamHTTP proxy -> static answer"
for label, name in (("SwiftNIO alone", nio), ("Hummingbird + AsyncHTTPClient", hb), ("Hummingbird + UpstreamHTTP (the gateway's stack)", hbu)):
    print(f"the floor, forwarding on {label}: {per_request(name, many):.3f} ms CPU per request at {many} connections, "
          f"{per_request(name, '1'):.3f} ms at 1; {by[(name, many)]['rps'] / by[(px, many)]['rps']:.3f}x nginx proxy_pass")
    # The CPU target's formula applied to the floor: where the floor alone is above 0.15 ms, no
    # gateway on that stack can meet it.
    floor_cpu, floor_count = combined(name)
    print(f"  by the CPU target's formula ({many} and 1 connections together): {floor_cpu / max(floor_count, 1):.3f} ms per request   (target <= 0.15)")
# The group commit: how many provisionings' writes shared one synced commit in each run.
for line in (open(sys.argv[10]) if os.path.exists(sys.argv[10]) else []):
    name, conns, c0, w0, c1, w1 = line.rstrip("\n").split("\t")
    if "-" in (c0, w0, c1, w1) or float(c1) <= float(c0):
        continue
    commits, writes, total = float(c1) - float(c0), float(w1) - float(w0), by[(name, conns)]["total"]
    print(f"store commits, {name.removeprefix('gateway -> static answer ')} at {conns} connection(s): "
          f"{writes / commits:.2f} writes per synced commit, {commits / max(total, 1):.2f} commits per request")
print(f"a provisioning's CPU over the Hummingbird + UpstreamHTTP floor ({many} connections): "
      f"{per_request(g, many) - per_request(hbu, many):+.3f} ms unkeyed, {per_request(gk, many) - per_request(hbu, many):+.3f} ms keyed")
bad = sum(r["non2xx"] for (n, _), r in by.items() if n.startswith("gateway") or n.startswith("floor"))
if bad:
    print(f"WARNING: the gateway or a floor proxy answered {bad} requests with a non-2xx status: the figures above are not provisionings")
    sys.exit(1)
PY

# The request path's own steps, without the network or the other processes' noise.
echo
echo "the request path's own steps (request-path-bench, one core, microseconds per call):"
"$(swift build -c "$config" --show-bin-path 2>/dev/null)/request-path-bench" "$(( duration < 3 ? 1 : 3 ))" | sed 's/^/  /'
