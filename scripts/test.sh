#!/usr/bin/env bash
# make test: typecheck, build (e2e tests run ./bin/jaco), build the demo images, run every tier.
# Nothing is skipped: a test that needs etcd or Docker fails loudly when it cannot get them.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
if [ "${CI:-}" = "true" ] && grep -rnE '\b(it|test|describe)\.(skip|todo)\(|\bxit\(' --include='*.ts' src controllers test; then
  echo "CI: skipped or todo tests above; with CI=true nothing may be skipped" >&2
  exit 1
fi
echo "== typecheck"
npx tsc -p tsconfig.json --noEmit
npx tsc -p web/tsconfig.json
echo "== deploy/ configurations (the alerting rules and the scrape config an operator is given)"
promtool check config deploy/prometheus/prometheus.yml >/dev/null
promtool check rules deploy/prometheus/jaco-rules.yml >/dev/null
echo "== build"
npx tsc -p tsconfig.build.json
node scripts/build-validators.mjs
node scripts/build-web.mjs
node scripts/build-info.mjs
echo "== demo images"
scripts/build-images.sh
if [ $# -gt 0 ]; then
  npx vitest run "$@"
else
  # e2e tests run real containers against real timings: give them the machine to themselves
  # instead of interleaving them with the other tiers on two cores.
  echo "== unit, integration and simulation tests"
  # Two workers on two cores (vitest's default leaves one idle): the simulation's halves and the
  # integration files (one etcd member each) run side by side.
  npx vitest run --project unit --project integration --project sim --maxWorkers=2
  echo "== end-to-end tests (real etcd, real Docker)"
  npx vitest run --project e2e
  echo "== chaos (3-member etcd, two controller copies, agents, Docker; seeded faults)"
  npx vitest run --project chaos
fi
echo "== make test passed in $(( $(date +%s) - start ))s"
