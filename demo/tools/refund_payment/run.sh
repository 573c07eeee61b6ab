#!/bin/sh
# refund_payment: pretends to refund a payment. Order A-9999 was never paid,
# so refunding it fails (exit status 1, reason on stderr).
# stdin: {"tool":"refund_payment","call_id":"...","input":{"order_id":"A-1001","amount":42.5}}
set -eu
input=$(cat)
order_id=$(printf '%s' "$input" | sed -n 's/.*"order_id":"\([A-Za-z0-9_-]*\)".*/\1/p')
amount=$(printf '%s' "$input" | sed -n 's/.*"amount":\([0-9][0-9.eE+-]*\).*/\1/p')
if [ -z "$order_id" ] || [ -z "$amount" ]; then
	echo "refund_payment: the request needs order_id and a positive amount" >&2
	exit 2
fi
if [ "$order_id" = "A-9999" ]; then
	echo "refund_payment: order $order_id was never paid, there is nothing to refund" >&2
	exit 1
fi
echo "refund_payment: refunding $amount on $order_id" >&2
printf '{"refund_id":"R-%s","order_id":"%s","amount":%s,"currency":"EUR","status":"refunded"}\n' \
	"$(date -u +%s)" "$order_id" "$amount"
