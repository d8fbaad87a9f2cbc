#!/usr/bin/env bash
# Gives each node-agent its own etcd user, with its own password, that can touch only its own
# node's keys (ARCHITECTURE.md: host-prefixed replica keys; its copies of secrets, docs/secrets.md), each node's ingress a user that reads
# what it routes and writes only its own report, and the controllers one user for the whole prefix. Run it with etcdctl pointed at the cluster (ETCDCTL_ENDPOINTS, and ETCDCTL_USER
# once auth is on) before `etcdctl auth enable`, and again for each node that joins later.
#
#   rbac.sh [--out DIR] PREFIX NODE...
#
# Writes DIR/controller.env, DIR/agent-NODE.env and DIR/ingress-NODE.env (mode 600; DIR defaults
# to ./jaco-credentials): JACO_ETCD_USER and JACO_ETCD_PASSWORD for that process. Copy
# agent-NODE.env to NODE as /etc/jaco/agent.env (deploy/systemd/jaco-agent.service reads it),
# ingress-NODE.env to NODE as /etc/jaco/ingress.env (jaco-ingress.service), and controller.env to
# the controller hosts as /etc/jaco/controller.env. A password is generated per user unless
# JACO_CONTROLLER_PASSWORD is set (controller); a user that already exists keeps its password and
# gets no file (delete the user to rotate it). A stolen agent password reaches one node's keys.
set -euo pipefail
out=./jaco-credentials
if [ "${1:-}" = "--out" ]; then out=${2:?--out needs a directory}; shift 2; fi
prefix=${1:?usage: rbac.sh [--out DIR] PREFIX NODE...}
shift
umask 077
mkdir -p "$out"
e() { etcdctl "$@" >/dev/null; }
exists() { etcdctl "$1" get "$2" >/dev/null 2>&1; }
password() { head -c 24 /dev/urandom | base64 | tr -d '/+=' ; }

# user NAME ROLE PASSWORD FILE: the user with its role, and its env file (only when created now).
user() {
  if exists user "$1"; then
    echo "rbac.sh: user $1 exists; kept (its password is unchanged, no file written)" >&2
  else
    e user add "$1" --new-user-password="$3"
    printf 'JACO_ETCD_USER=%s\nJACO_ETCD_PASSWORD=%s\n' "$1" "$3" >"$4"
  fi
  e user grant-role "$1" "$2"
}
role() { exists role "$1" || e role add "$1"; }

role jaco-controller
e role grant-permission jaco-controller --prefix=true readwrite "$prefix"
user jaco-controller jaco-controller "${JACO_CONTROLLER_PASSWORD:-$(password)}" "$out/controller.env"

for node in "$@"; do
  name="jaco-agent-$node"
  role "$name"
  # What a node-agent reads and writes, and nothing more (test/integration/etcd-security.test.ts).
  for k in "desired/$node/" "commands/$node/"; do e role grant-permission "$name" --prefix=true read "$prefix$k"; done
  e role grant-permission "$name" --prefix=true readwrite "${prefix}observed/$node/"
  # Its copies of the secrets and configs its replicas use, sealed to its own key: only its own.
  e role grant-permission "$name" --prefix=true read "${prefix}copies/$node/"
  # cluster: the uid that labels containers, created by whichever process asks first.
  for k in "nodes/$node" "heartbeats/$node" "cluster"; do e role grant-permission "$name" readwrite "$prefix$k"; done
  e role grant-permission "$name" read "${prefix}drains/$node"
  # What operators decided about its node (cordon, labels, trust): read only, so a stolen agent
  # password cannot uncordon or trust its node (issue 29).
  e role grant-permission "$name" read "${prefix}nodespecs/$node"
  # The controllers' clock beacon, which it measures its clock's skew against (a watch: a range).
  e role grant-permission "$name" --prefix=true read "${prefix}clock"
  # What it pulls images with: the registries' users, CAs and flags (no password: that reaches it
  # as its copy of a secret, under copies/<node>/) and the image setting (jaco registry login, default).
  e role grant-permission "$name" --prefix=true read "${prefix}registries/"
  # The services' addresses: the names its resolver answers (docs/networking.md, Names).
  e role grant-permission "$name" --prefix=true read "${prefix}serviceaddresses/"
  # As a prefix: the agent watches the key (its pause image's registry), and a watch is a range.
  e role grant-permission "$name" --prefix=true read "${prefix}config/images"
  # The WireGuard mesh (--overlay): every node's published key and endpoint, and every node's subnets.
  for k in nodes/ subnets/; do e role grant-permission "$name" --prefix=true read "$prefix$k"; done
  user "$name" "$name" "$(password)" "$out/agent-$node.env"

  # Its ingress: reads the published ports, the endpoints and the nodes' addresses; writes only
  # its own report (ingresses/NODE). It never touches replicas.
  name="jaco-ingress-$node"
  role "$name"
  for k in deployments/ endpoints/ nodes/ serviceaddresses/; do e role grant-permission "$name" --prefix=true read "$prefix$k"; done
  # The cluster network's ranges: the service range it makes local to its node (docs/networking.md).
  e role grant-permission "$name" --prefix=true read "${prefix}config/network"
  e role grant-permission "$name" readwrite "${prefix}ingresses/$node"
  user "$name" "$name" "$(password)" "$out/ingress-$node.env"
done
echo "rbac.sh: credentials in $out (agent-NODE.env → /etc/jaco/agent.env, ingress-NODE.env → /etc/jaco/ingress.env on NODE)" >&2
