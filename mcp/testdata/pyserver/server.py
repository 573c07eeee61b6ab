#!/usr/bin/env python3
"""A small MCP server over stdio in plain Python (no packages), for agentd's
end-to-end tests: the same tools as mcp/internal/testserver, which runs on the
Go SDK, so that a server written by someone else, in another language, is
tried too. Messages are JSON-RPC 2.0, one per line (the MCP stdio transport).

Tools:
  note {text}  (no annotations: confirm tier) appends text to $NOTES_FILE
  lookup {q}   (readOnlyHint) answers "found <q> (pid <pid>)"
  grow {}      (readOnlyHint) adds the tool extra and sends list_changed
  extra {}     (readOnlyHint, after grow) answers "extra"
  wait {}      (readOnlyHint) appends "waiting", waits for its
               notifications/cancelled, then appends "cancelled"
"""
import json
import os
import sys
import threading

NOTES = os.environ.get("NOTES_FILE", "")
OUT = threading.Lock()
CANCELLED = {}  # request id -> threading.Event, for wait
TOOLS = {
    "note": {"description": "Writes a note.",
             "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}},
    "lookup": {"description": "Looks something up.", "annotations": {"readOnlyHint": True},
               "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}}},
    "grow": {"description": "Adds the tool extra.", "annotations": {"readOnlyHint": True},
             "inputSchema": {"type": "object"}},
    "wait": {"description": "Waits until cancelled.", "annotations": {"readOnlyHint": True},
             "inputSchema": {"type": "object"}},
}


def send(msg):
    with OUT:
        sys.stdout.write(json.dumps(msg) + "\n")
        sys.stdout.flush()


def note(line):
    with open(NOTES, "a") as f:
        f.write(line + "\n")


def text(s):
    return {"content": [{"type": "text", "text": s}]}


def call(rid, name, args):
    if name == "note":
        note(args.get("text", ""))
        return text("noted " + args.get("text", ""))
    if name == "lookup":
        return text("found %s (pid %d)" % (args.get("q", ""), os.getpid()))
    if name == "grow":
        TOOLS["extra"] = {"description": "Added later.", "annotations": {"readOnlyHint": True},
                          "inputSchema": {"type": "object"}}
        send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        return text("grown")
    if name == "extra" and "extra" in TOOLS:
        return text("extra")
    if name == "wait":
        note("waiting")
        CANCELLED[rid].wait()
        note("cancelled")
        return None  # a cancelled request gets no answer
    return {"content": [{"type": "text", "text": "unknown tool " + name}], "isError": True}


def run_call(rid, params):
    try:
        result = call(rid, params.get("name", ""), params.get("arguments") or {})
    except Exception as e:  # the caller reads the error, the server lives on
        result = {"content": [{"type": "text", "text": str(e)}], "isError": True}
    CANCELLED.pop(rid, None)
    if result is not None:
        send({"jsonrpc": "2.0", "id": rid, "result": result})


def handle(msg):
    method, rid, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": rid, "result": {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {"listChanged": True}},
            "serverInfo": {"name": "agentd-test-python", "version": "1"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": rid, "result": {
            "tools": [dict(name=name, **spec) for name, spec in TOOLS.items()]}})
    elif method == "tools/call":
        CANCELLED[rid] = threading.Event()
        threading.Thread(target=run_call, args=(rid, params), daemon=True).start()
    elif method == "notifications/cancelled":
        ev = CANCELLED.get(params.get("requestId"))
        if ev is not None:
            ev.set()
    elif method == "ping":
        send({"jsonrpc": "2.0", "id": rid, "result": {}})
    elif rid is not None:
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "method not found: %s" % method}})


def main():
    for line in sys.stdin:
        line = line.strip()
        if line:
            handle(json.loads(line))


if __name__ == "__main__":
    main()
