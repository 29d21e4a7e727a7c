# Sourced by the scripts that start a gateway: `wait_for_gateway PID LOG` returns once the
# gateway's banner is in LOG, or prints LOG and exits 1 if the gateway died or took over 10 s.
wait_for_gateway() {
  local pid=$1 log=$2
  for _ in $(seq 1 100); do
    grep -q "^provisioning-gateway listening on" "$log" && return 0
    kill -0 "$pid" 2>/dev/null || { cat "$log"; echo "gateway exited early"; exit 1; }
    sleep 0.1
  done
  cat "$log"; echo "gateway did not start within 10 s"; exit 1
}
