#!/usr/bin/env bash
# make test: typecheck, build (e2e tests run ./bin/jaco), build the demo images, run every tier.
# Nothing is skipped: a test that needs etcd or Docker fails loudly when it cannot get them.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
echo "== typecheck"
npx tsc -p tsconfig.json --noEmit
echo "== build"
npx tsc -p tsconfig.build.json
echo "== demo images"
scripts/build-images.sh
echo "== tests"
npx vitest run "$@"
echo "== make test passed in $(( $(date +%s) - start ))s"
