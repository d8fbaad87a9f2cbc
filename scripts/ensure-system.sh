#!/usr/bin/env bash
# Installs what jaco's tests and `make up` need from Debian's packages when it is missing
# (etcd, Docker, HAProxy, Prometheus, busybox-static, iproute2, jemalloc), then makes sure a Docker engine answers, starting
# dockerd with no bridge network if none runs (the network rule: loopback and host networking only).
set -euo pipefail

need=()
command -v etcd >/dev/null 2>&1 || need+=(etcd-server)
command -v etcdctl >/dev/null 2>&1 || need+=(etcd-client)
command -v dockerd >/dev/null 2>&1 || need+=(docker.io)
dpkg -s busybox-static >/dev/null 2>&1 || need+=(busybox-static)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
command -v openssl >/dev/null 2>&1 || need+=(openssl)
# The overlay between nodes: wireguard-go where the kernel has no WireGuard; wg and tcpdump for its tests.
command -v wireguard-go >/dev/null 2>&1 && command -v wg >/dev/null 2>&1 && command -v tcpdump >/dev/null 2>&1 || need+=(wireguard-go wireguard-tools tcpdump)
# build-images.sh makes the demo server images (postgres, redis, nginx) from a debootstrapped Debian.
command -v debootstrap >/dev/null 2>&1 || [ -x /usr/sbin/debootstrap ] || need+=(debootstrap)
# The ingress drives a local HAProxy (run as a child of `jaco ingress`, never the system service).
command -v haproxy >/dev/null 2>&1 || [ -x /usr/sbin/haproxy ] || need+=(haproxy)
# The cluster registry (CNCF distribution 2.8), run as a child of jaco with its own config, never the system service.
[ -x /usr/bin/docker-registry ] || need+=(docker-registry)
# The agent plumbs cluster-network replicas with the CNI ptp plugin (and its static IPAM).
[ -x /usr/lib/cni/ptp ] || need+=(containernetworking-plugins)
# The service-address benchmark's load generator (test/bench/service-address.bench.ts).
command -v wrk >/dev/null 2>&1 || need+=(wrk)
# promtool checks deploy/prometheus/ in make test; Prometheus scrapes a real cluster in an e2e test.
command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1 || need+=(prometheus)
# The controllers run on jemalloc where it is installed (src/supervise/allocator.ts).
compgen -G "/usr/lib/*/libjemalloc.so.2" >/dev/null || [ -e /usr/lib/libjemalloc.so.2 ] || need+=(libjemalloc2)
# The dashboard's e2e test drives Debian's headless Chromium (playwright-core never downloads a browser).
[ -x /usr/bin/chromium ] || need+=(chromium)

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

if [ ${#need[@]} -gt 0 ]; then
  echo "ensure-system: installing ${need[*]} with apt-get"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

docker_cli=/usr/bin/docker
[ -x "$docker_cli" ] || docker_cli=$(command -v docker)

if ! "$docker_cli" version >/dev/null 2>&1; then
  echo "ensure-system: starting dockerd (--bridge=none, no iptables)"
  mkdir -p /var/log
  # No open file of ours goes with it: run under flock (the heavy-suite lock), dockerd would hold
  # the lock's file descriptor for its whole life and every later waiter would wait for ever.
  $SUDO bash -c 'for fd in $(ls /proc/$$/fd); do [ "$fd" -gt 2 ] && eval "exec $fd>&-" 2>/dev/null; done; nohup dockerd --bridge=none --iptables=false --ip-forward=false --ip-masq=false --log-level=warn >/var/log/jaco-dockerd.log 2>&1 &'
  for _ in $(seq 1 60); do
    "$docker_cli" version >/dev/null 2>&1 && break
    sleep 0.5
  done
  if ! "$docker_cli" version >/dev/null 2>&1; then
    echo "ensure-system: dockerd did not start; its log:" >&2
    tail -n 30 /var/log/jaco-dockerd.log >&2 || true
    exit 1
  fi
fi
echo "ensure-system: etcd $(etcd --version | head -n1 | awk '{print $3}'), docker engine $("$docker_cli" version --format '{{.Server.Version}}'), $(haproxy -v 2>/dev/null | head -n1 | awk '{print $1, $3}')"
