#!/usr/bin/env bash
# What each large dependency costs the agentd binary: for each part, a
# program that only imports it (its package initialisers run, nothing
# else) is built with the module's own go.mod, and this prints its file
# size and its resident memory after init (VmRSS, read by the program
# itself), each minus the same for an empty program. The parts share
# dependencies (net/http, protobuf), so their deltas do not add up; and
# the linker drops what no init reaches, so a part's size here is less
# than what it adds to agentd, which calls it. The last rows are agentd's
# own packages imported the same way, and the agentd binary serving the
# embedded demo until /readyz.
#   bench/rssparts.sh            # a markdown table on stdout
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d ./_rssparts.XXXXXX) # inside the module: its go.mod pins the versions
trap 'rm -rf "$work"' EXIT

parts=(
  "empty program|"
  "echo v4 + net/http|github.com/labstack/echo/v4"
  "SQLite (modernc)|modernc.org/sqlite"
  "pgx v5 + pgxpool|github.com/jackc/pgx/v5/pgxpool"
  "OpenTelemetry SDK (sdk/trace)|go.opentelemetry.io/otel/sdk/trace"
  "OpenTelemetry SDK + OTLP/HTTP exporter|go.opentelemetry.io/otel/sdk/trace go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
  "MCP go-sdk|github.com/modelcontextprotocol/go-sdk/mcp"
  "OpenAI SDK|github.com/openai/openai-go/v3"
  "Anthropic SDK|github.com/anthropics/anthropic-sdk-go/v2"
  "kin-openapi|github.com/getkin/kin-openapi/openapi3"
  "Prometheus client|github.com/prometheus/client_golang/prometheus"
  "agentd's packages (server and all it imports)|github.com/agentd-dev/agentd/server"
)

measure() { # name dir → "size_bytes rss_kib"
  local bin="$work/$1.bin"
  go build -o "$bin" "./$work/$1" >/dev/null
  echo "$(stat -c %s "$bin") $("$bin")"
}

base_size=0 base_rss=0
printf '| part | binary size | Δ size | RSS after init | Δ RSS |\n|---|---|---|---|---|\n'
i=0
for entry in "${parts[@]}"; do
  name=${entry%%|*}; imports=${entry#*|}
  i=$((i + 1)); dir="$work/p$i"; mkdir -p "$dir"
  {
    echo 'package main'
    echo 'import ('
    echo '	"bytes"'
    echo '	"fmt"'
    echo '	"os"'
    for imp in $imports; do echo "	_ \"$imp\""; done
    echo ')'
    echo 'func main() {'
    echo '	b, _ := os.ReadFile("/proc/self/status")'
    echo '	for _, l := range bytes.Split(b, []byte("\n")) {'
    echo '		var kib int'
    echo '		if _, err := fmt.Sscanf(string(l), "VmRSS: %d kB", &kib); err == nil {'
    echo '			fmt.Println(kib)'
    echo '		}'
    echo '	}'
    echo '}'
  } > "$dir/main.go"
  read -r size rss < <(measure "p$i")
  if [ "$i" = 1 ]; then base_size=$size base_rss=$rss; fi
  printf '| %s | %.1f MB | %+.1f MB | %.1f MiB | %+.1f MiB |\n' "$name" \
    "$(echo "$size/1000000" | bc -l)" "$(echo "($size-$base_size)/1000000" | bc -l)" \
    "$(echo "$rss/1024" | bc -l)" "$(echo "($rss-$base_rss)/1024" | bc -l)"
done

# The real binary at ready on an empty project's data folder.
bin="$work/agentd"
go build -o "$bin" ./cmd/agentd
data=$(mktemp -d)
"$bin" serve --addr 127.0.0.1:0 --data "$data" >"$data/out" 2>"$data/log" &
pid=$!
base=""
for _ in $(seq 1 300); do # the port the kernel gave it, from the "agentd listening on" line, then /readyz
  base=${base:-$(sed -n 's/.*listening on \(http:[^ ]*\).*/\1/p' "$data/out" 2>/dev/null | head -1)}
  [ -n "$base" ] && curl -sf "$base/readyz" >/dev/null 2>&1 && break
  sleep 0.1
done
[ -n "$base" ] || { echo "rssparts.sh: agentd did not start:" >&2; cat "$data/log" >&2; exit 1; }
rss=$(awk '/VmRSS/ {print $2}' "/proc/$pid/status")
kill "$pid"; wait "$pid" 2>/dev/null || true; rm -rf "$data"
printf '| agentd serve (the demo) at /readyz | %.1f MB | %+.1f MB | %.1f MiB | %+.1f MiB |\n' \
  "$(echo "$(stat -c %s "$bin")/1000000" | bc -l)" "$(echo "($(stat -c %s "$bin")-$base_size)/1000000" | bc -l)" \
  "$(echo "$rss/1024" | bc -l)" "$(echo "($rss-$base_rss)/1024" | bc -l)"
