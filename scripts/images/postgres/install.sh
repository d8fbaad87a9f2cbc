#!/bin/sh
# Runs in the chroot of jaco-demo/postgres:15 while it is built; the packages come as arguments.
set -eu
here=$(dirname "$0")

# The official image's postgres uid and gid (999), so a data directory moves between the two.
groupadd --system --gid 999 postgres
useradd --system --uid 999 --gid postgres --home-dir /var/lib/postgresql --shell /bin/bash postgres
mkdir -p /var/lib/postgresql && chown postgres:postgres /var/lib/postgresql
# No cluster under /etc/postgresql: the entrypoint initialises $PGDATA on the first start instead.
mkdir -p /etc/postgresql-common
echo 'create_main_cluster = false' > /etc/postgresql-common/createcluster.conf

DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends --no-download "$@"

# Every data directory initdb makes listens on all addresses, as in the official image.
sed -ri "s!^#?(listen_addresses)\s*=\s*\S+.*!\1 = '*'!" /usr/share/postgresql/15/postgresql.conf.sample
grep -q "^listen_addresses = '\*'" /usr/share/postgresql/15/postgresql.conf.sample
# ssl-cert made a key at install; one private key baked into an image would be shared by every copy.
rm -f /etc/ssl/private/ssl-cert-snakeoil.key /etc/ssl/certs/ssl-cert-snakeoil.pem
# The socket directory, writable by any user the server runs as (official image: 3777).
mkdir -p /var/run/postgresql && chown postgres:postgres /var/run/postgresql && chmod 3777 /var/run/postgresql
mkdir -p /docker-entrypoint-initdb.d
install -m 0755 "$here/docker-entrypoint.sh" /usr/local/bin/docker-entrypoint.sh
