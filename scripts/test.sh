#!/usr/bin/env bash
# make test: typecheck, build (e2e tests run ./bin/jaco), build the demo images (beside the first tiers), run every tier.
# Nothing is skipped: a test that needs etcd or Docker fails loudly when it cannot get them.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
if [ "${CI:-}" = "true" ] && grep -rnE '\b(it|test|describe)\.(skip|todo)\(|\bxit\(' --include='*.ts' src controllers test; then
  echo "CI: skipped or todo tests above; with CI=true nothing may be skipped" >&2
  exit 1
fi
# The deterministic simulation is pure computation and its result cannot depend on load: it runs
# from the start, beside everything else, at the lowest CPU priority, so it takes only the cycles
# the other tiers leave idle (tsc is one thread; an e2e file leaves ~40 % of the two cores idle).
# Its own session (setsid, so the trap can stop all of it) is its own scheduling group where the
# kernel groups by session (sched_autogroup_enabled, on for these machines), and a task's nice
# counts only inside its group: the group itself gets the lowest priority too. Without it the
# simulation, "at nice 19", took a full core of the two from the tiers beside it (measured with
# two busy loops beside one: 95 % of a core, 4 % with the group's nice set).
sim_pid=
sim_log=
if [ $# -eq 0 ]; then
  sim_log=$(mktemp /tmp/jaco-sim-XXXXXX.log)
  setsid --wait bash -c 'if [ -w /proc/self/autogroup ]; then echo 19 >/proc/self/autogroup; fi; exec nice -n 19 npx vitest run --project sim --maxWorkers=2' >"$sim_log" 2>&1 &
  sim_pid=$!
fi
# The demo images are only e2e's and chaos's (the unit and integration tiers run no container): on a
# new machine they are built beside the typecheck and those tiers — most of their time is Debian's
# mirror and Docker's disk — and e2e waits for them. Their own session, so the trap stops all of it.
images_pid=
images_log=
if [ $# -eq 0 ]; then
  images_log=$(mktemp /tmp/jaco-images-XXXXXX.log)
  setsid --wait scripts/build-images.sh >"$images_log" 2>&1 &
  images_pid=$!
fi
hosts_pid=
hosts_log=
# On the way out (a tier failed, or an interrupt): the jobs beside are stopped, and a second e2e
# lane stopped halfway shows what it had done.
# (Under set -e a failing command ends a trap's function: a job already finished must not stop it.)
stop_beside() {
  for p in $sim_pid $images_pid $hosts_pid; do kill -- -"$p" 2>/dev/null || true; done
  if [ -n "$hosts_pid" ] && [ -f "$hosts_log" ]; then
    echo "== the second e2e lane (stopped if it had not finished); its output:"
    cat "$hosts_log"
  fi
  true
}
trap stop_beside EXIT
echo "== typecheck"
npx tsc -p tsconfig.json --noEmit
npx tsc -p web/tsconfig.json
echo "== deploy/ configurations (the alerting rules and the scrape config an operator is given)"
promtool check config deploy/prometheus/prometheus.yml >/dev/null
promtool check rules deploy/prometheus/jaco-rules.yml >/dev/null
echo "== build"
npm run --silent build
if [ $# -gt 0 ]; then
  echo "== demo images"
  scripts/build-images.sh
fi
# One tier: its failures recapped at the end of the output (scripts/failure-recap.mjs), where a
# reader of the log's tail finds them.
tier() {
  local name=$1 report
  shift
  report=$(mktemp /tmp/jaco-vitest-XXXXXX.json)
  if npx vitest run "$@" --reporter=default --reporter=json --outputFile.json="$report"; then
    rm -f "$report"
  else
    node scripts/failure-recap.mjs "$report" "$name"
    rm -f "$report"
    echo "== make test failed in $(( $(date +%s) - start ))s" >&2
    exit 1
  fi
}
# A job started beside the tiers (its pid and log in the variables named): waited for, its log
# shown, and make test stopped if it failed. Its pid is cleared, so the exit trap leaves it be.
join_beside() {
  local what=$1 pid_var=$2 log_var=$3 rc=0
  wait "${!pid_var}" || rc=$?
  printf -v "$pid_var" '%s' ''
  cat "${!log_var}"
  rm -f "${!log_var}"
  [ "$rc" -eq 0 ] || { echo "make test: $what failed (above)" >&2; exit "$rc"; }
}
if [ $# -gt 0 ]; then
  tier selected "$@"
else
  echo "== unit and integration tests"
  # Three workers on two cores: an integration file (one etcd member each) waits — on etcd, on
  # the processes it starts — so two of them left cycles idle.
  tier "unit and integration" --project unit --project integration --maxWorkers=3
  echo "== demo images (built beside the tiers above)"
  join_beside "building the demo images" images_pid images_log
  # e2e files run real containers against real timings after the other tiers, in two lanes at
  # once, each one file at a time: the files on this machine's engine, and the files on separate
  # hosts of their own (vitest.config.ts: nothing of theirs is shared with the first lane) followed
  # by chaos. One file alone leaves ~40 % of the two cores idle, waiting on engines and timers.
  # The second lane's output is shown when both are done; its own session, so the trap stops it.
  hosts_log=$(mktemp /tmp/jaco-e2e-hosts-XXXXXX.log)
  export -f tier
  export start
  setsid --wait bash -c 'tier "e2e on separate hosts" --project e2e-hosts && echo "== chaos (3-member etcd, two controller copies, agents, Docker; seeded faults)" && tier chaos --project chaos' >"$hosts_log" 2>&1 &
  hosts_pid=$!
  echo "== end-to-end tests on this machine's engine (real etcd, real Docker)"
  tier e2e --project e2e
  echo "== end-to-end tests on separate hosts, then chaos (run beside the lane above)"
  join_beside "the second lane (e2e on separate hosts, chaos)" hosts_pid hosts_log
  echo "== simulation (run beside the tiers above, at the lowest priority)"
  join_beside "the simulation" sim_pid sim_log
fi
echo "== make test passed in $(( $(date +%s) - start ))s"
