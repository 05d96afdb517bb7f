"""Drives the arena's `/mcp` with the official MCP Python client (`mcp` 2.3, which dev/test keeps
in its own folder: it pins its own pydantic). test_mcp.py runs it as a subprocess with that folder
on PYTHONPATH. It reads one JSON object on stdin, `{"url", "token", "steps": [...]}`, and prints
one JSON object: the negotiated protocol version and server name, and an answer per step.

A step is `{"list": true}` (the tools, as the client parsed them), `{"get": PATH, "time": N}` (the
JSON route timed through the same HTTP client, for comparison), or
`{"tool": NAME, "args": {...}}`, optionally with `"until": {"field": F, "in": [...]}` and
`"timeout": S` (the call is repeated every second until the structured answer's field takes one of
those values), or `"time": N` (the call is made N times and the median seconds are answered)."""

import asyncio
import json
import statistics
import sys
import time

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client


def answer(result):
    text = "".join(getattr(c, "text", "") for c in result.content)
    return {"is_error": bool(result.is_error), "structured": result.structured_content, "text": text}


async def step(client, http, base, s):
    if "get" in s:
        seconds = []
        for _ in range(s["time"]):
            start = time.perf_counter()
            r = await http.get(base + s["get"])
            seconds.append(time.perf_counter() - start)
            assert r.status_code == 200, r.text
        return {"median_s": statistics.median(seconds), "calls": len(seconds)}
    if s.get("list"):
        listed = await client.list_tools()
        return {"tools": [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in listed.tools]}
    name, args = s["tool"], s.get("args", {})
    if "time" in s:
        seconds = []
        for _ in range(s["time"]):
            start = time.perf_counter()
            result = await client.call_tool(name, args)
            seconds.append(time.perf_counter() - start)
            assert not result.is_error, answer(result)
        return {"median_s": statistics.median(seconds), "calls": len(seconds)}
    until, deadline = s.get("until"), time.monotonic() + s.get("timeout", 60)
    while True:
        got = answer(await client.call_tool(name, args))
        if not until or got["is_error"] or (got["structured"] or {}).get(until["field"]) in until["in"]:
            return got
        if time.monotonic() > deadline:
            got["timed_out"] = True
            return got
        await asyncio.sleep(1)


async def main(request):
    headers = {"Authorization": "Bearer " + request["token"]} if request.get("token") else {}
    http = httpx2.AsyncClient(headers=headers, timeout=60)
    async with Client(streamable_http_client(request["url"], http_client=http)) as client:
        out = {"protocol_version": client.protocol_version,
               "server": client.server_info.name if client.server_info else None,
               "instructions": client.instructions, "answers": []}
        for s in request["steps"]:
            out["answers"].append(await step(client, http, request["url"].rsplit("/mcp", 1)[0], s))
    return out


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(json.load(sys.stdin)))))
