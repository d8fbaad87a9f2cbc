#!/usr/bin/env bash
# Gives each node-agent an etcd user that can write only its own keys (ARCHITECTURE.md: host-
# prefixed replica keys), and the controllers a user for the whole prefix. Run once with an etcd
# root user, then `etcdctl auth enable`. Usage: rbac.sh PREFIX NODE...
set -euo pipefail
prefix=${1:?usage: rbac.sh PREFIX NODE...}
shift
e() { etcdctl "$@"; }
e role add jaco-controller
e role grant-permission jaco-controller --prefix=true readwrite "$prefix"
e user add jaco-controller --new-user-password="${JACO_CONTROLLER_PASSWORD:?set JACO_CONTROLLER_PASSWORD}"
e user grant-role jaco-controller jaco-controller
for node in "$@"; do
  role="jaco-agent-$node"
  e role add "$role"
  # What a node-agent reads and writes, and nothing more (test/integration/etcd-security.test.ts).
  for k in "desired/$node/" "commands/$node/"; do e role grant-permission "$role" --prefix=true read "$prefix$k"; done
  e role grant-permission "$role" --prefix=true readwrite "${prefix}observed/$node/"
  for k in "nodes/$node" "heartbeats/$node" "cluster"; do e role grant-permission "$role" readwrite "$prefix$k"; done
  e role grant-permission "$role" read "${prefix}drains/$node"
  e user add "$role" --new-user-password="${JACO_AGENT_PASSWORD:?set JACO_AGENT_PASSWORD}"
  e user grant-role "$role" "$role"
done
