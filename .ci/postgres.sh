#!/usr/bin/env bash
# Install Debian's PostgreSQL and start a throwaway cluster on 127.0.0.1:55432; writes its URL to
# .ci/postgres.url for the tests. Skipped quietly only when apt is missing (not a Debian machine).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v pg_ctlcluster >/dev/null && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  if ! command -v apt-get >/dev/null; then echo "postgres: no apt-get here; PostgreSQL tests will skip"; exit 0; fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq postgresql >/dev/null
fi
bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
data=/tmp/losstune-pg
if ! "$bin/pg_ctl" -D "$data" status >/dev/null 2>&1; then
  rm -rf "$data"; mkdir -p "$data"; chown postgres "$data"
  su postgres -c "$bin/initdb -D $data -A trust -U postgres" >/dev/null
  su postgres -c "$bin/pg_ctl -D $data -o '-p 55432 -k /tmp -c listen_addresses=127.0.0.1' -l $data/log -w start" >/dev/null
fi
su postgres -c "psql -h 127.0.0.1 -p 55432 -U postgres -tc \"SELECT 1 FROM pg_database WHERE datname='losstune'\"" | grep -q 1 \
  || su postgres -c "psql -h 127.0.0.1 -p 55432 -U postgres -c 'CREATE DATABASE losstune'" >/dev/null
echo "postgresql://postgres@127.0.0.1:55432/losstune" > .ci/postgres.url
echo "postgres: running at $(cat .ci/postgres.url)"
