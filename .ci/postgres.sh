#!/usr/bin/env bash
# Install Debian's PostgreSQL and start a throwaway cluster on 127.0.0.1:55432; writes its URL to
# .ci/postgres.url for the tests. Without apt (not a Debian machine) it says so and the tests skip.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  if ! command -v apt-get >/dev/null; then echo "postgres: no apt-get here; PostgreSQL tests will skip"; exit 0; fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq postgresql >/dev/null
fi
bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
data=/tmp/losstune-pg
if ! su postgres -c "$bin/pg_ctl -D $data status" >/dev/null 2>&1; then
  rm -rf "$data"; mkdir -p "$data"; chown postgres "$data"
  su postgres -c "$bin/initdb -D $data -A trust -U postgres" >/dev/null
  su postgres -c "$bin/pg_ctl -D $data -o '-p 55432 -k /tmp -c listen_addresses=127.0.0.1' -l $data/log -w start" >/dev/null
fi
psql_="psql -h 127.0.0.1 -p 55432 -U postgres"
$psql_ -tc "SELECT 1 FROM pg_database WHERE datname='losstune'" | grep -q 1 || $psql_ -qc 'CREATE DATABASE losstune'
echo "postgresql+psycopg2://postgres@127.0.0.1:55432/losstune" > .ci/postgres.url
echo "postgres: running at $(cat .ci/postgres.url)"
