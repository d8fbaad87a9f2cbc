#!/bin/sh
# Entrypoint of jaco-demo/redis:7, after the official redis image's: as root it hands the working
# directory (/data) to the redis user and runs itself again as that user (setpriv, from
# util-linux), then execs the server, which logs to stdout and saves and exits on SIGTERM.
set -eu

# `docker run IMAGE --appendonly yes` or `docker run IMAGE /path/redis.conf` means the server.
case "${1:-}" in -* | *.conf) set -- redis-server "$@" ;; esac

if [ "${1:-}" = redis-server ]; then
	if [ "$(id -u)" = 0 ]; then
		find . \! -user redis -exec chown redis '{}' +
		exec setpriv --reuid=redis --regid=redis --init-groups "$0" "$@"
	fi
	# Protected mode off, as the official image's build makes it by default: the server listens on
	# every address and the container's network decides who reaches it. Options given later
	# override it; with a config file, the file decides.
	shift
	case "${1:-}" in
	'' | -*) set -- redis-server --protected-mode no "$@" ;;
	*) set -- redis-server "$@" ;;
	esac
	[ "$(umask)" != 0022 ] || umask 0077
fi
exec "$@"
