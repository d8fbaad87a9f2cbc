#!/bin/sh
# Runs in the chroot of jaco-demo/redis:7 while it is built; the packages come as arguments.
set -eu
here=$(dirname "$0")

# The official image's redis uid and gid (999), so a /data volume moves between the two.
groupadd --system --gid 999 redis
useradd --system --uid 999 --gid redis --home-dir /var/lib/redis --shell /usr/sbin/nologin redis

DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends --no-download "$@"

# The server runs with redis's built-in defaults (every address, port 6379, log to stdout, dump in
# the working directory /data), as the official image does: Debian's /etc/redis/redis.conf (bound
# to loopback, daemonised, logging to a file) is not used.
mkdir -p /data && chown redis:redis /data
install -m 0755 "$here/docker-entrypoint.sh" /usr/local/bin/docker-entrypoint.sh
