#!/bin/sh
# Entrypoint of jaco-demo/nginx:1. Like the official image's, it makes the shipped default server
# listen on IPv6 too when the container has an IPv6 address (a file mounted over default.conf is
# left alone), then execs nginx in the foreground: it logs to stdout/stderr and SIGQUIT stops it
# gracefully.
set -eu

conf=/etc/nginx/conf.d/default.conf
case "${1:-}" in
nginx | nginx-debug)
	if grep -qs . /proc/net/if_inet6 && grep -q '^ *#listen  \[::\]:80;  # jaco-ipv6' "$conf" 2>/dev/null; then
		if [ -w "$conf" ] && sed -i 's/^\( *\)#listen  \[::\]:80;  # jaco-ipv6.*$/\1listen  [::]:80;/' "$conf"; then
			echo "$0: listening on IPv6 too in $conf"
		else
			echo "$0: cannot enable IPv6 in $conf (read-only?); IPv4 only" >&2
		fi
	fi
	;;
esac
exec "$@"
