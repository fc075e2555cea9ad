"""A third-party MCP client against ploke: the official Python SDK (`mcp` from PyPI).

Driven by client/tests/suite/mcp.rs:

    python mcp_client.py http URL TOKEN MODE [--create NAME]
    python mcp_client.py stdio MODE [--create NAME] -- COMMAND ARGS...

MODE is `auto` (2026-07-28 when the server speaks it) or `legacy` (the initialize handshake).
Lists the tools, calls request_code_context and read_file (the SDK validates structured
content against each tool's outputSchema), sends bad arguments, and with --create asks for
create_file NAME, which waits until a person approves it with `ploke edits approve`. Prints
one JSON line with what it saw; exits non-zero on any surprise.
"""

import asyncio
import json
import os
import sys

import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

TOOLS = [
    "request_code_context",
    "get_file_metadata",
    "apply_code_edit",
    "read_file",
    "list_dir",
    "search_code",
    "code_item_lookup",
    "create_file",
]
LIB_RS = "/// Adds two numbers.\npub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n"


def check(cond, what):
    if not cond:
        raise SystemExit(f"unexpected: {what}")


async def scenario(client, create):
    seen = {}
    tools = await client.list_tools()
    names = [t.name for t in tools.tools]
    check(names == TOOLS, f"tools {names}")
    check(all(t.output_schema and t.input_schema for t in tools.tools), "schemas")
    seen["tools"] = len(names)

    # A checkout whose services just started may still be indexing: its results say so.
    for _ in range(240):
        context = await client.call_tool("request_code_context", {"search_term": "add two numbers"})
        check(not context.is_error, f"context {context}")
        parts = context.structured_content.get("parts", [])
        if parts or not context.structured_content.get("index_note"):
            break
        await asyncio.sleep(0.25)
    check(parts and parts[0]["file_path"] == "src/lib.rs", f"parts {parts}")
    seen["context_first"] = parts[0]["file_path"]

    read = await client.call_tool("read_file", {"file": "src/lib.rs"})
    check(not read.is_error, f"read {read}")
    check(read.structured_content["content"] == LIB_RS, f"content {read.structured_content}")
    seen["read_lines"] = read.structured_content["total_lines"]

    bad = await client.call_tool("read_file", {"file": "src/lib.rs", "start_line": 0})
    check(bad.is_error, "bad arguments accepted")
    check(bad.structured_content["field"] == "start_line", f"bad {bad.structured_content}")
    seen["bad_code"] = bad.structured_content["code"]

    if create:
        print(f"waiting for approval of {create}", file=sys.stderr, flush=True)
        made = await client.call_tool(
            "create_file", {"file_path": create, "content": "made over MCP\n"}, read_timeout_seconds=120
        )
        check(not made.is_error, f"create {made}")
        seen["created"] = made.structured_content["files_changed"]
        seen["state"] = made.structured_content["state"]
    return seen


async def main(argv):
    create = None
    if "--create" in argv:
        i = argv.index("--create")
        create = argv[i + 1]
        del argv[i : i + 2]
    kind = argv[0]
    if kind == "http":
        url, token, mode = argv[1], argv[2], argv[3]
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=120)
        target = streamable_http_client(url, http_client=http)
    else:
        mode = argv[1]
        command = argv[argv.index("--") + 1 :]
        target = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))
    async with Client(target, mode=mode) as client:
        seen = await scenario(client, create)
    print(json.dumps(seen, sort_keys=True))


asyncio.run(main(sys.argv[1:]))
