#!/bin/bash
# Prints the frames and the stack use of an idle stream's handler goroutine
# (docs/performance.md §24): builds and starts the binary on the embedded
# defaults, opens one stream with curl, and reads the frames of a
# GOTRACEBACK=system dump (kill -QUIT). Usage: scripts/stackdepth.sh [repo dir]
set -e
D=$(mktemp -d)
cd "${1:-$(dirname "$0")/..}" && go build -o $D/agentd ./cmd/agentd
cd $D
PORT=$((20000 + RANDOM % 10000))
GOTRACEBACK=system HOME=$D ./agentd serve --addr 127.0.0.1:$PORT > out.log 2> err.log &
PID=$!
for i in $(seq 50); do curl -s -o /dev/null http://127.0.0.1:$PORT/healthz && break; sleep 0.1; done
A=http://127.0.0.1:$PORT
CONV=$(curl -s -X POST $A/v1/conversations | sed -E 's/.*"id":"([^"]+)".*/\1/')
curl -sN $A/v1/conversations/$CONV/events > /dev/null &
CP=$!
sleep 0.5
kill -QUIT $PID; sleep 0.5; kill $CP 2>/dev/null || true
python3 - err.log <<'PY'
import re,sys
txt=open(sys.argv[1]).read()
for g in txt.split("\n\n"):
    if "sse.(*stream).live(" not in g: continue
    lines=g.split("\n")
    fr=[]
    for i,l in enumerate(lines):
        m=re.search(r"fp=0x([0-9a-f]+) sp=0x([0-9a-f]+)",l)
        if m: fr.append((lines[i-1][:lines[i-1].rfind("(")], int(m.group(1),16), int(m.group(2),16)))
    top=max(f[1] for f in fr); low=min(f[2] for f in fr)
    for name,fp,sp in fr: print(f"{fp-sp:6d}  {name}")
    print("used", top-low)
PY
rm -rf $D
