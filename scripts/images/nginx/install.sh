#!/bin/sh
# Runs in the chroot of jaco-demo/nginx:1 while it is built; the packages come as arguments.
set -eu
here=$(dirname "$0")

DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends --no-download "$@"

# The official image's layout: nginx.conf includes conf.d/*.conf, whose default.conf serves
# /usr/share/nginx/html; Debian's sites-enabled default server (/var/www/html) is not used.
install -m 0644 "$here/nginx.conf" /etc/nginx/nginx.conf
install -m 0644 "$here/default.conf" /etc/nginx/conf.d/default.conf
rm -f /etc/nginx/sites-enabled/default
rm -rf /var/www/html
mkdir -p /usr/share/nginx/html
install -m 0644 "$here/index.html" "$here/50x.html" /usr/share/nginx/html/
# Logs go to the container's output, as in the official image.
ln -sf /dev/stdout /var/log/nginx/access.log
ln -sf /dev/stderr /var/log/nginx/error.log
# wget (busybox's) for fetching pages and health checks from inside the container.
ln -sf /bin/busybox /usr/local/bin/wget
install -m 0755 "$here/docker-entrypoint.sh" /usr/local/bin/docker-entrypoint.sh
