#!/usr/bin/env bash
# Runs every check and test of agentd on a fresh machine: formatting, vet,
# staticcheck (pinned in go.mod's tool block), and the race-enabled test
# suite (real SQLite files, a real PostgreSQL, real subprocesses, the real
# binary on loopback, the real JavaScript SDK clients on Node 22, a real
# Chromium).
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

echo "== go vet"
go vet ./...

if go tool -n staticcheck >/dev/null 2>&1; then
  echo "== staticcheck"
  go tool staticcheck ./...
fi

# go mod tidy loads the tests of every dependency too, and the Anthropic and
# OpenAI SDKs' tests import the AWS, Google Cloud and Azure SDKs: about 1 GB
# of modules that no agentd package builds. So go.mod is checked offline,
# after go vet and staticcheck fetched everything agentd's packages and tests
# build from: tidy -e on the modules at hand names a requirement that nothing
# needs; a missing requirement or go.sum line fails go vet above
# (-mod=readonly). Offline, go.sum and the "// indirect" marks are not
# compared (tidy cannot read the modules it was not given), and a
# difference it reports is confirmed by the full check below. The full
# check, with the downloads, always: AGENTD_FULL_TIDY=1 ./scripts/test.sh.
echo "== go.mod tidy"
if [ "${AGENTD_FULL_TIDY:-}" = 1 ]; then
  go mod tidy -diff
else
  gomod_diff=$(GOPROXY=off GOFLAGS=-mod=mod go mod tidy -e -diff 2>/dev/null |
    sed -n '/^diff current\/go.mod/,/^diff current\/go.sum/p' | grep '^[-+][^-+]' || true)
  if [ -n "$gomod_diff" ]; then
    # Offline, tidy can be wrong both ways when the module cache holds some
    # but not all of the modules it would read (a developer's warm cache):
    # it then names requirements as unneeded that the full graph needs. So
    # a difference is confirmed by the full check before it fails the run.
    echo "the offline check says go mod tidy would change:"; echo "$gomod_diff"
    echo "confirming with the full go mod tidy -diff (it downloads the modules it reads)"
    go mod tidy -diff
  fi
fi

echo "== JavaScript runtime, packages and browser for the SDK and browser tests"
# shellcheck source=scripts/js.sh
source scripts/js.sh

echo "== jq for the demo's block-channel hook"
if ! command -v jq >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq jq) >/dev/null
  else
    echo "jq is missing and this user cannot apt-get install it" >&2; exit 1
  fi
fi

echo "== python3 for the MCP server written in Python (mcp/testdata/pyserver)"
if ! command -v python3 >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3) >/dev/null
  else
    echo "python3 is missing and this user cannot apt-get install it" >&2; exit 1
  fi
fi

echo "== PostgreSQL for the postgres store's tests (stopped when this script exits)"
# shellcheck source=scripts/postgres.sh
source scripts/postgres.sh

echo "== go test -race"
# The timeout is a net for a hung test, not a budget: on a busy 2-core
# machine cmd/agentd alone took 14.5 minutes (docs/testing.md).
go test -race -count=1 -timeout 40m "$@" ./...

# The benchmarks once each, briefly: a broken harness fails here, not on the
# day someone needs the figures (docs/performance.md has the full runs).
echo "== benchmarks (one iteration each)"
go test -run '^$' -bench . -benchtime 1x -timeout 10m ./bench/
