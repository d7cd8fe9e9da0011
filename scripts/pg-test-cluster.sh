#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for Loom's postgres suites, on a loopback port, run by a
# non-root user (the `postgres` user when invoked as root). Needs the server binaries
# (Debian: `apt-get install -y postgresql`); no system service is used.
#
#   scripts/pg-test-cluster.sh start    # idempotent; prints the URL to export as LOOM_PG_URL
#   scripts/pg-test-cluster.sh stop     # idempotent
#   scripts/pg-test-cluster.sh url
#   scripts/pg-test-cluster.sh run -- npx vitest run test/postgres
#       (a fresh cluster in a temporary directory, LOOM_PG_URL exported for the command,
#        then stopped and removed)
#
# Settings: LOOM_PG_DIR (data directory, default /tmp/loom-pg-$LOOM_PG_PORT),
# LOOM_PG_PORT (default 5433), LOOM_PG_DB (default loom), LOOM_PG_OPTIONS (more server settings
# for `start`, e.g. "-c shared_preload_libraries=pg_stat_statements -c track_io_timing=on" to see
# where the server's time goes). The superuser is `loom`, trusted
# on the loopback interface and the socket only.
set -euo pipefail

PORT="${LOOM_PG_PORT:-5433}"
DB="${LOOM_PG_DB:-loom}"
DIR="${LOOM_PG_DIR:-/tmp/loom-pg-$PORT}"

die() {
  echo "pg-test-cluster: $*" >&2
  exit 1
}

bindir() {
  if command -v pg_config >/dev/null 2>&1 && [ -x "$(pg_config --bindir)/initdb" ]; then
    pg_config --bindir
    return
  fi
  local found
  found="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)"
  if [ -n "$found" ] && [ -x "$found/initdb" ]; then
    echo "$found"
    return
  fi
  if command -v initdb >/dev/null 2>&1; then
    dirname "$(command -v initdb)"
    return
  fi
  die "no PostgreSQL server binaries (initdb, pg_ctl) found; install them (Debian: apt-get install -y postgresql)"
}

BIN="$(bindir)"

# The server refuses to run as root: as root, every server command runs as `postgres`.
as_owner() {
  if [ "$(id -u)" -eq 0 ]; then
    id postgres >/dev/null 2>&1 || die "running as root but there is no 'postgres' user to run the server"
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

url() {
  echo "postgres://loom@127.0.0.1:$PORT/$DB"
}

running() {
  [ -f "$DIR/PG_VERSION" ] && as_owner "$BIN/pg_ctl" -D "$DIR" status >/dev/null 2>&1
}

start() {
  if ! [ -f "$DIR/PG_VERSION" ]; then
    mkdir -p "$DIR"
    [ "$(id -u)" -eq 0 ] && chown postgres: "$DIR"
    chmod 700 "$DIR"
    as_owner "$BIN/initdb" -D "$DIR" -U loom -A trust -E UTF8 --locale=C.UTF-8 >"$DIR.initdb.log" 2>&1 ||
      die "initdb failed; see $DIR.initdb.log"
  fi
  if ! running; then
    as_owner "$BIN/pg_ctl" -D "$DIR" -l "$DIR/server.log" -w -t 60 \
      -o "-p $PORT -k /tmp -c listen_addresses=127.0.0.1 -c max_connections=200 ${LOOM_PG_OPTIONS:-}" start >/dev/null ||
      die "the server did not start; see $DIR/server.log"
  fi
  if ! as_owner "$BIN/psql" -h 127.0.0.1 -p "$PORT" -U loom -d postgres -tAc \
    "SELECT 1 FROM pg_database WHERE datname = '$DB'" | grep -q 1; then
    as_owner "$BIN/createdb" -h 127.0.0.1 -p "$PORT" -U loom "$DB"
  fi
  url
}

stop() {
  if running; then as_owner "$BIN/pg_ctl" -D "$DIR" -m fast -w stop >/dev/null; fi
}

case "${1:-}" in
start) start ;;
stop) stop ;;
url) url ;;
run)
  shift
  [ "${1:-}" = "--" ] && shift
  [ "$#" -gt 0 ] || die "usage: $0 run -- <command…>"
  # A fresh cluster of its own: a temporary directory and the first free port from 5434.
  if [ -z "${LOOM_PG_PORT:-}" ]; then
    PORT=5434
    while (echo >"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; do PORT=$((PORT + 1)); done
  fi
  DIR="$(mktemp -d /tmp/loom-pg-run-XXXXXX)"
  trap 'stop; rm -rf "$DIR" "$DIR.initdb.log"' EXIT
  LOOM_PG_URL="$(start)"
  export LOOM_PG_URL
  echo "pg-test-cluster: LOOM_PG_URL=$LOOM_PG_URL" >&2
  "$@"
  ;;
*) die "usage: $0 start | stop | url | run -- <command…>" ;;
esac
