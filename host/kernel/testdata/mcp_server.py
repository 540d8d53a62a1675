#!/usr/bin/python3
"""The tests' MCP server written by hand: newline-delimited JSON-RPC 2.0
on stdin/stdout, the MCP handshake, tools/list and tools/call."""
import json
import os
import sys

VERSIONS = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]

TOOLS = [
    {
        "name": "add",
        "description": "Add two integers",
        "inputSchema": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
            "additionalProperties": False,
        },
    },
    {
        "name": "environ",
        "description": "List the names of the environment variables",
        "inputSchema": {"type": "object"},
    },
    {
        "name": "bad.name",
        "description": "A tool whose name cannot stand in a fluffy tool name",
        "inputSchema": {"type": "object"},
    },
]


def reply(msg_id, result=None, error=None):
    out = {"jsonrpc": "2.0", "id": msg_id}
    if error is not None:
        out["error"] = error
    else:
        out["result"] = result
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()


def text(s, is_error=False):
    return {"content": [{"type": "text", "text": s}], "isError": is_error}


def call(name, args):
    if name == "add":
        return text(str(int(args["a"]) + int(args["b"])))
    if name == "environ":
        return text(" ".join(sorted(os.environ)))
    return None


for line in sys.stdin:
    line = line.strip()
    if not line:
        continue
    msg = json.loads(line)
    method, msg_id = msg.get("method"), msg.get("id")
    if msg_id is None:
        continue  # a notification (notifications/initialized, ...)
    params = msg.get("params") or {}
    if method == "initialize":
        want = params.get("protocolVersion")
        reply(msg_id, {
            "protocolVersion": want if want in VERSIONS else VERSIONS[1],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "fixture-python", "version": "1.0.0"},
        })
    elif method == "ping":
        reply(msg_id, {})
    elif method == "tools/list":
        reply(msg_id, {"tools": TOOLS})
    elif method == "tools/call":
        res = call(params.get("name"), params.get("arguments") or {})
        if res is None:
            reply(msg_id, error={"code": -32602, "message": "unknown tool"})
        else:
            reply(msg_id, res)
    else:
        reply(msg_id, error={"code": -32601, "message": "method not found: " + str(method)})
