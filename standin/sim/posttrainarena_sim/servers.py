"""The job's two servers, simulated: `posttrainarena-vllm-serve` (TRL's vLLM server: `GET
/health/`, `GET /get_world_size/`, the weight-sync POSTs; it refuses a non-loopback host, as the
real wrapper does) and `posttrainarena-train model-bridge` (the OpenAI-compatible bridge: `GET
/health`, `GET /v1/models` and `POST /v1/chat/completions` behind its bearer key). Neither serves
a model: a chat completion answers 501.

The stand-in's jobs share this machine's network, so the bridge binds loopback whatever `--host`
says (a job's container would bind every interface). The server checks what the real one would
refuse at start: the loopback rule, the context caps, and the GPUs `CUDA_VISIBLE_DEVICES` gives
against tensor × data parallelism."""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import sys
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from . import SIMULATION
from .common import faults


class Handler(BaseHTTPRequestHandler):
    routes: dict = {}
    key: str | None = None

    def log_message(self, *args) -> None:
        pass

    def answer(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def handle_any(self, method: str) -> None:
        length = int(self.headers.get("content-length") or 0)
        if length:
            self.rfile.read(min(length, 1 << 20))
        route = self.routes.get((method, self.path.split("?")[0]))
        if route is None:
            return self.answer(404, {"detail": "Not Found"})
        needs_key, status, body = route
        if needs_key and self.key is not None and self.headers.get("authorization") != f"Bearer {self.key}":
            return self.answer(401, {"detail": "invalid bearer token"})
        self.answer(status, body)

    def do_GET(self) -> None:  # noqa: N802
        self.handle_any("GET")

    def do_POST(self) -> None:  # noqa: N802
        self.handle_any("POST")


def serve(host: str, port: int, routes: dict, key: str | None, banner: str) -> None:
    handler = type("H", (Handler,), {"routes": routes, "key": key})
    server = ThreadingHTTPServer(("127.0.0.1", port), handler)
    print(f"{banner} ({SIMULATION}) listening on http://127.0.0.1:{server.server_port} (asked for {host}:{port})",
          flush=True)
    server.serve_forever()


def vllm_main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="posttrainarena-vllm-serve")
    p.add_argument("--model", required=True)
    p.add_argument("--revision")
    p.add_argument("--tensor-parallel-size", "--tensor_parallel_size", type=int, default=1)
    p.add_argument("--data-parallel-size", "--data_parallel_size", type=int, default=1)
    p.add_argument("--host", default="0.0.0.0")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--gpu-memory-utilization", "--gpu_memory_utilization", type=float, default=0.9)
    p.add_argument("--dtype", default="auto")
    p.add_argument("--max-model-len", "--max_model_len", type=int)
    p.add_argument("--enable-prefix-caching", "--enable_prefix_caching", action="store_true")
    p.add_argument("--enforce-eager", "--enforce_eager", action="store_true")
    p.add_argument("--kv-cache-dtype", "--kv_cache_dtype", default="auto")
    p.add_argument("--trust-remote-code", "--trust_remote_code", action="store_true")
    p.add_argument("--log-level", "--log_level", default="info")
    args = p.parse_args(argv)
    try:
        loopback = args.host == "localhost" or ipaddress.ip_address(args.host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise ValueError("posttrainarena-vllm-serve must bind to a loopback host; use an authenticated tunnel or proxy for remote access")
    if faults().get("fail_at") == "setup":
        print(f"vLLM: {faults().get('reason') or 'the model server failed to start'} ({SIMULATION} fault)", file=sys.stderr)
        return 1
    gpus = [g for g in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if g.strip()]
    need = args.tensor_parallel_size * args.data_parallel_size
    if len(gpus) != need:
        print(f"vLLM: tensor_parallel_size {args.tensor_parallel_size} × data_parallel_size {args.data_parallel_size} "
              f"needs {need} GPU(s); CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '')!r} ({SIMULATION})",
              file=sys.stderr)
        return 1
    ok = {"message": f"{SIMULATION}: no weights are loaded"}
    routes = {
        ("GET", "/health/"): (False, 200, {"status": "ok"}),
        ("GET", "/get_world_size/"): (False, 200, {"world_size": need}),
        ("POST", "/init_communicator/"): (False, 200, ok),
        ("POST", "/update_named_param/"): (False, 200, ok),
        ("POST", "/reset_prefix_cache/"): (False, 200, ok),
        ("POST", "/close_communicator/"): (False, 200, ok),
        ("POST", "/chat/"): (False, 501, {"detail": f"{SIMULATION}: no model is served"}),
    }
    serve(args.host, args.port, routes, None, f"TRL vLLM server for {args.model}@{args.revision} on GPUs {','.join(gpus)}")
    return 0


def bridge_parser(sub) -> None:
    b = sub.add_parser("model-bridge")
    b.add_argument("--upstream-url")
    b.add_argument("--tokenizer", required=True)
    b.add_argument("--tokenizer-revision")
    b.add_argument("--api-key-env", default="BENCHFLOW_PROVIDER_API_KEY")
    b.add_argument("--max-tokens", type=int, default=4096)
    b.add_argument("--max-context-tokens", type=int, default=49152)
    b.add_argument("--max-logprob-context-tokens", type=int, default=16384)
    b.add_argument("--max-sidecar-entries", type=int, default=2048)
    b.add_argument("--host", default="0.0.0.0")
    b.add_argument("--port", type=int, default=8001)


def bridge_main(args: argparse.Namespace) -> int:
    upstream = args.upstream_url or os.environ.get("TRL_VLLM_SERVER_BASE_URL")
    if not upstream:
        raise RuntimeError("model-bridge requires --upstream-url or TRL_VLLM_SERVER_BASE_URL")
    if args.max_tokens < 1:
        raise ValueError("max_tokens_per_call must be a positive integer")
    if args.max_context_tokens <= args.max_tokens:
        raise ValueError("max_context_tokens must be an integer greater than max_tokens_per_call")
    if args.max_logprob_context_tokens <= args.max_tokens:
        raise ValueError("max_logprob_context_tokens must be an integer greater than max_tokens_per_call")
    try:
        with urllib.request.urlopen(upstream.rstrip("/") + "/health/", timeout=10):
            pass
    except OSError as e:
        print(f"model-bridge: the upstream TRL server {upstream} does not answer yet ({e})", file=sys.stderr)
    models = {"object": "list", "data": [{"id": args.tokenizer, "object": "model", "created": 0, "owned_by": "posttrainarena"}]}
    routes = {
        ("GET", "/health"): (False, 200, {"ok": True}),
        ("GET", "/v1/models"): (True, 200, models),
        ("POST", "/v1/chat/completions"): (True, 501, {"detail": f"{SIMULATION}: no model is served"}),
    }
    serve(args.host, args.port, routes, os.environ.get(args.api_key_env) or None,
          f"model bridge for {args.tokenizer} (context {args.max_context_tokens}, reply {args.max_tokens})")
    return 0
