#!/usr/bin/env bash
# The module rules of the README's Architecture section, checked on the sources: each module may
# import only the first-party modules listed for it (third-party packages are governed by
# Package.swift). ProvisioningCore stays Foundation-only. Exit 1 naming every file that breaks a rule.
set -euo pipefail
cd "$(dirname "$0")/.."

# ByteText (the one hex/base64 implementation) is a Foundation-only leaf every module may import.
declare -A allowed=(
  [ByteText]=""
  # jemalloc's C header (the package trait Jemalloc); GatewayServer reports the allocator.
  [CJemalloc]=""
  [ProvisioningCore]=""
  # BoundedFile, the one bounded whole-file read (ProvisioningCore, Foundation-only).
  [PEMFiles]="ProvisioningCore"
  [WalletCrypto]="ByteText"
  [ProvisioningAPI]=""
  [Sandbox]="WalletCrypto ByteText"
  [Issuers]="ProvisioningCore WalletCrypto PEMFiles ByteText"
  [GatewayStore]="ProvisioningCore PEMFiles ByteText"
  [Gateway]="ProvisioningCore Issuers GatewayStore WalletCrypto ByteText"
  [GatewayServer]="Gateway GatewayStore ProvisioningAPI ProvisioningCore PEMFiles ByteText CJemalloc"
  [SandboxGateway]="GatewayServer Gateway ProvisioningAPI ProvisioningCore Sandbox WalletCrypto ByteText"
  [provisioning-gateway]="GatewayServer SandboxGateway ProvisioningCore"
  [ProvisioningGatewayClient]=""
  [gateway-soak]="ProvisioningGatewayClient"
  [wallet-crypto-bench]="WalletCrypto"
  [request-path-bench]="Gateway GatewayStore ProvisioningAPI ProvisioningCore"
  # The benchmark's floor: forwarding with nothing of the gateway's but its upstream client.
  [proxy-floor]="Issuers ProvisioningCore"
)
# Besides first-party modules, what ProvisioningCore may import.
core_system="Foundation Synchronization ByteText"

first_party=()
for dir in Sources/*/; do first_party+=("$(basename "$dir")"); done

status=0
for dir in Sources/*/; do
  module=$(basename "$dir")
  if [[ -z ${allowed[$module]+set} ]]; then
    echo "check-imports: Sources/$module has no rule here; add it (and to the README's Architecture section)"
    status=1
    continue
  fi
  while IFS=: read -r file line text; do
    imported=$(sed -E 's/^[[:space:]]*(@[A-Za-z_]+([(][^)]*[)])?[[:space:]]+)*((public|package|internal|private|fileprivate)[[:space:]]+)?import[[:space:]]+(struct |class |enum |protocol |func |typealias )?([A-Za-z0-9_]+).*/\6/' <<<"$text")
    if [[ $module == ProvisioningCore ]]; then
      if [[ " $core_system " != *" $imported "* ]]; then
        echo "check-imports: $file:$line: ProvisioningCore is Foundation-only, it imports $imported"
        status=1
      fi
      continue
    fi
    for candidate in "${first_party[@]}"; do
      if [[ $imported == "$candidate" && " ${allowed[$module]} " != *" $imported "* ]]; then
        echo "check-imports: $file:$line: $module may not import $imported (allowed: ${allowed[$module]:-none})"
        status=1
      fi
    done
  done < <(grep -rnE '^[[:space:]]*(@[A-Za-z_]+([(][^)]*[)])?[[:space:]]+)*((public|package|internal|private|fileprivate)[[:space:]]+)?import[[:space:]]' "$dir" --include='*.swift' || true)
done
if [[ $status == 0 ]]; then echo "check-imports: every module imports only what the architecture allows"; fi
exit $status
