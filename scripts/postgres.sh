#!/usr/bin/env bash
# Starts a throwaway PostgreSQL 15 for the tests and exports where it is
# (sourced by scripts/test.sh; stopped and removed when that shell exits):
#   - Debian's postgresql package, installed with apt-get when missing;
#   - a cluster made by initdb in a temp dir owned by a non-root user (the
#     system user agentd-pg, created when running as root: PostgreSQL
#     refuses to run as root), listening on a unix socket in that dir only;
#   - AGENTD_TEST_POSTGRES_URL, a URL of the superuser on that socket: the
#     tests create a database of their own with a random name and drop it.
# The tests fail instead of skipping when AGENTD_POSTGRES_REQUIRED=1 (set
# here), so a broken install cannot pass CI. A URL already in
# AGENTD_TEST_POSTGRES_URL is used as it is and nothing is started.
set -euo pipefail

if [ -z "${AGENTD_TEST_POSTGRES_URL:-}" ]; then
  pg_bin=/usr/lib/postgresql/15/bin
  if [ ! -x "$pg_bin/initdb" ]; then
    if [ "$(id -u)" = 0 ]; then
      # postgresql-common first, told not to create and start a system
      # cluster of its own when postgresql-15 is installed: the tests need
      # only theirs.
      (apt-get update -qq &&
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql-common &&
        sed -i 's/^#* *create_main_cluster *=.*/create_main_cluster = false/' /etc/postgresql-common/createcluster.conf &&
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql-15) >/dev/null
    else
      echo "PostgreSQL 15 is missing and this user cannot apt-get install it" >&2; exit 1
    fi
  fi

  pg_dir="$(mktemp -d /tmp/agentd-pg.XXXXXX)"
  # as_pg runs a command as the cluster's owner: agentd-pg under root,
  # else the current user.
  if [ "$(id -u)" = 0 ]; then
    if ! id agentd-pg >/dev/null 2>&1; then
      useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin agentd-pg
    fi
    chown agentd-pg: "$pg_dir"
    as_pg() { (cd / && runuser -u agentd-pg -- "$@"); }
  else
    as_pg() { (cd / && "$@"); }
  fi
  chmod 700 "$pg_dir"

  agentd_pg_stop() {
    as_pg "$pg_bin/pg_ctl" -D "$pg_dir/data" -m immediate stop >/dev/null 2>&1 || true
    rm -rf "$pg_dir"
  }
  trap agentd_pg_stop EXIT

  as_pg "$pg_bin/initdb" -D "$pg_dir/data" -U postgres -A trust -E UTF8 --no-sync >/dev/null
  # fsync off: a test cluster that dies is thrown away, never recovered.
  as_pg "$pg_bin/pg_ctl" -D "$pg_dir/data" -l "$pg_dir/log" -w -s \
    -o "-c listen_addresses='' -k $pg_dir -c max_connections=300 -c fsync=off -c synchronous_commit=off -c full_page_writes=off" \
    start
  export AGENTD_TEST_POSTGRES_URL="postgres:///postgres?host=$pg_dir&user=postgres&sslmode=disable"
fi
export AGENTD_POSTGRES_REQUIRED=1
