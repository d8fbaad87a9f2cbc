#!/bin/sh
# Entrypoint of jaco-demo/postgres:15: the official postgres image's contract for the common cases.
# As root it hands $PGDATA and the socket directory to the postgres user and runs itself again as
# that user (setpriv, from util-linux); as postgres it initialises $PGDATA on the first start only
# (POSTGRES_USER, POSTGRES_PASSWORD[_FILE], POSTGRES_DB, /docker-entrypoint-initdb.d), then execs
# the server, which logs to stderr and stops on SIGINT (fast shutdown).
set -eu

# VAR, or VAR_FILE naming a file that holds it (a mounted secret); not both.
file_env() {
	var=$1
	default=${2:-}
	eval "val=\${$var:-}; file=\${${var}_FILE:-}"
	if [ -n "$val" ] && [ -n "$file" ]; then
		echo "error: both $var and ${var}_FILE are set (but are exclusive)" >&2
		exit 1
	fi
	if [ -n "$file" ]; then
		val=$(cat "$file")
	elif [ -z "$val" ]; then
		val=$default
	fi
	export "$var=$val"
	unset "${var}_FILE"
}

psql_init() {
	psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --no-password --no-psqlrc "$@"
}

init_database() {
	# TCP connections (loopback too) need the password; the unix socket inside the container trusts.
	auth=${POSTGRES_HOST_AUTH_METHOD:-scram-sha-256}
	if [ -z "$POSTGRES_PASSWORD" ] && [ "$auth" != trust ]; then
		cat >&2 <<-'EOM'
			error: the database is uninitialised and no superuser password is given.
			       Set POSTGRES_PASSWORD (or POSTGRES_PASSWORD_FILE) to a non-empty value, or
			       POSTGRES_HOST_AUTH_METHOD=trust to let every connection in without a password.
		EOM
		exit 1
	fi

	pwfile=
	if [ -n "$POSTGRES_PASSWORD" ]; then
		pwfile=$(mktemp)
		printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"
	fi
	# POSTGRES_INITDB_ARGS is split into words, as in the official image.
	eval 'initdb --username="$POSTGRES_USER" ${pwfile:+--pwfile="$pwfile"} --auth-local=trust --auth-host="$auth" '"${POSTGRES_INITDB_ARGS:-}"
	[ -z "$pwfile" ] || rm -f "$pwfile"
	printf '\nhost all all all %s\n' "$auth" >>"$PGDATA/pg_hba.conf"

	# A server on the unix socket only while the database is made and the init scripts run.
	pg_ctl -D "$PGDATA" -o "-c listen_addresses='' -p ${PGPORT:-5432}" -w start
	if [ "$POSTGRES_DB" != postgres ]; then
		psql_init --dbname postgres --set db="$POSTGRES_DB" <<-'EOSQL'
			CREATE DATABASE :"db" ;
		EOSQL
	fi
	for f in /docker-entrypoint-initdb.d/*; do
		case "$f" in
		*.sh) echo "$0: running $f"; . "$f" ;;
		*.sql) echo "$0: running $f"; psql_init --dbname "$POSTGRES_DB" -f "$f" ;;
		*.sql.gz) echo "$0: running $f"; gzip -dc "$f" | psql_init --dbname "$POSTGRES_DB" ;;
		*) [ ! -e "$f" ] || echo "$0: ignoring $f" ;;
		esac
	done
	pg_ctl -D "$PGDATA" -m fast -w stop
	echo "$0: PostgreSQL init process complete; ready for start up."
}

# `docker run IMAGE -c key=value` means the server with those flags.
case "${1:-}" in -*) set -- postgres "$@" ;; esac

if [ "${1:-}" = postgres ]; then
	: "${PGDATA:=/var/lib/postgresql/data}"
	export PGDATA
	# Read while still root (a secret mounted 0400 is root's); the environment carries them over.
	file_env POSTGRES_PASSWORD
	file_env POSTGRES_USER postgres
	file_env POSTGRES_DB "$POSTGRES_USER"
	if [ "$(id -u)" = 0 ]; then
		mkdir -p "$PGDATA" /var/run/postgresql
		chmod 0700 "$PGDATA" || :
		find "$PGDATA" \! -user postgres -exec chown postgres:postgres '{}' +
		chown postgres:postgres /var/run/postgresql
		chmod 3777 /var/run/postgresql
		exec setpriv --reuid=postgres --regid=postgres --init-groups "$0" "$@"
	fi
	# A data directory that already holds a cluster is kept as it is (a restart, a new container on
	# the same volume).
	if [ ! -s "$PGDATA/PG_VERSION" ]; then
		init_database
	fi
fi
exec "$@"
