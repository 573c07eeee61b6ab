#!/bin/sh
# lookup_order: prints a fake status for the order named in the request.
# stdin:  {"tool":"lookup_order","call_id":"...","input":{"order_id":"A-1001"}}
# stdout: the result as JSON; stderr: logs; exit status non-zero: failure.
set -eu
input=$(cat)
order_id=$(printf '%s' "$input" | sed -n 's/.*"order_id":"\([A-Za-z0-9_-]*\)".*/\1/p')
if [ -z "$order_id" ]; then
	echo "lookup_order: the request has no valid order_id" >&2
	exit 2
fi
echo "lookup_order: looking up $order_id" >&2
printf '{"order_id":"%s","status":"shipped","carrier":"DHL","total":42.5,"currency":"EUR","checked_at":"%s"}\n' \
	"$order_id" "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
