#!/bin/sh
# rotate_keys: pretends to rotate keys. operator-gated is a label only: the
# runtime does not enforce it, so this runs without a prompt.
# stdin: {"tool":"rotate_keys","call_id":"...","input":{"scope":"api"}}
set -eu
input=$(cat)
scope=$(printf '%s' "$input" | sed -n 's/.*"scope":"\([a-z]*\)".*/\1/p')
[ -n "$scope" ] || scope=api
echo "rotate_keys: rotating $scope keys" >&2
printf '{"rotated":true,"scope":"%s","new_key_id":"key_%s"}\n' "$scope" "$(date -u +%Y%m%d%H%M%S)"
