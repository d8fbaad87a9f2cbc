#!/usr/bin/env bash
# Kept for runbooks that call it: the roles are defined once, in src/store/rbac.ts, and applied by
# `jaco etcd rbac` (its --help says what each user may touch). This maps etcdctl's environment
# (ETCDCTL_ENDPOINTS, ETCDCTL_USER, ETCDCTL_CACERT/CERT/KEY) onto jaco's and calls it.
#
#   rbac.sh [--out DIR] PREFIX NODE...
set -euo pipefail
out=()
if [ "${1:-}" = "--out" ]; then out=(--out "${2:?--out needs a directory}"); shift 2; fi
prefix=${1:?usage: rbac.sh [--out DIR] PREFIX NODE...}
shift
jaco=${JACO:-$(command -v jaco || echo "$(dirname "$0")/../../bin/jaco")}
export JACO_ENDPOINTS=${JACO_ENDPOINTS:-${ETCDCTL_ENDPOINTS:-}}
[ -n "$JACO_ENDPOINTS" ] || unset JACO_ENDPOINTS
if [ -n "${ETCDCTL_USER:-}" ]; then export JACO_ETCD_USER=$ETCDCTL_USER; fi
if [ -n "${ETCDCTL_CACERT:-}" ]; then export JACO_ETCD_CACERT=$ETCDCTL_CACERT; fi
if [ -n "${ETCDCTL_CERT:-}" ]; then export JACO_ETCD_CERT=$ETCDCTL_CERT; fi
if [ -n "${ETCDCTL_KEY:-}" ]; then export JACO_ETCD_KEY=$ETCDCTL_KEY; fi
exec "$jaco" --prefix "$prefix" etcd rbac "${out[@]}" "$@"
