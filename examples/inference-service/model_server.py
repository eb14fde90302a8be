"""A local OpenAI-compatible model server for the example service.

It answers POST /v1/chat/completions (and GET /v1/models) on loopback the way
an OpenAI-compatible engine does, with a canned completion instead of a
model. Two versions of one model are served, the way a canary rollout runs:
a request goes to the canary when its X-Request-ID hashes below
--canary-share, and the canary fails every request it gets (HTTP 500, like an
engine that hit a CUDA error) when --fail-canary is set. The version that
served (or failed) a request is in the x-model-version response header and,
on success, in the response's "model".

Ground truth for a root-cause ranking: with --fail-canary, every failing
request went to the canary version and no healthy one did.

Standard library only, so it runs in any Python 3.9+.
"""

import argparse
import hashlib
import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def canary_bucket(request_id: str) -> float:
    """Where a request id falls in [0, 1): the same id always routes the same way."""
    digest = hashlib.sha256(request_id.encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def count_tokens(text: str) -> int:
    return max(1, len(text.split()))


class Handler(BaseHTTPRequestHandler):
    server_version = "loom-example-model-server/1"
    # set by main()
    options: argparse.Namespace

    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        if self.options.verbose:
            super().log_message(format, *args)

    def _send(self, status: int, body: dict, version: str = "") -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if version:
            self.send_header("x-model-version", version)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):  # noqa: N802 - http.server's name
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            opts = self.options
            models = [{"id": m, "object": "model", "owned_by": "loom-example"} for m in (opts.model, opts.stable, opts.canary)]
            self._send(200, {"object": "list", "data": models})
        elif self.path == "/health":
            self._send(200, {"status": "ok"})
        else:
            self._send(404, {"error": {"message": "not found", "type": "invalid_request_error"}})

    def do_POST(self):  # noqa: N802
        if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
            self._send(404, {"error": {"message": "not found", "type": "invalid_request_error"}})
            return
        try:
            length = int(self.headers.get("Content-Length", "0"))
            req = json.loads(self.rfile.read(length) or b"{}")
            messages = req["messages"]
        except (ValueError, KeyError, TypeError) as e:
            self._send(400, {"error": {"message": f"bad request: {e}", "type": "invalid_request_error"}})
            return
        opts = self.options
        if req.get("model") not in (opts.model, opts.stable, opts.canary):
            self._send(404, {"error": {"message": f"model {req.get('model')!r} not found", "type": "invalid_request_error", "code": "model_not_found"}})
            return
        request_id = self.headers.get("X-Request-ID", "")
        version = opts.canary if request_id and canary_bucket(request_id) < opts.canary_share else opts.stable
        time.sleep(opts.latency_ms / 1000)
        if version == opts.canary and opts.fail_canary:
            self._send(500, {"error": {"message": f"{version}: CUDA error: an illegal memory access was encountered", "type": "server_error", "code": "engine_error"}}, version)
            return
        prompt = " ".join(str(m.get("content", "")) for m in messages if isinstance(m, dict))
        completion = f"Summary: {prompt[:60]}"
        prompt_tokens, completion_tokens = count_tokens(prompt), count_tokens(completion)
        self._send(200, {
            "id": "chatcmpl-" + hashlib.sha256((request_id or prompt).encode()).hexdigest()[:24],
            "object": "chat.completion",
            "created": int(time.time()),
            "model": version,
            "system_fingerprint": "fp_" + hashlib.sha256(version.encode()).hexdigest()[:10],
            "choices": [{"index": 0, "message": {"role": "assistant", "content": completion}, "finish_reason": "stop", "logprobs": None}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens, "total_tokens": prompt_tokens + completion_tokens},
        }, version)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--host", default="127.0.0.1", help="listen address (loopback by default)")
    p.add_argument("--port", type=int, default=8000, help="listen port; 0 picks a free one")
    p.add_argument("--model", default="llama3-8b", help="the model name clients ask for")
    p.add_argument("--stable", default="llama3-8b-v2.1.4", help="the version most requests get")
    p.add_argument("--canary", default="llama3-8b-v2.2.0", help="the canary version")
    p.add_argument("--canary-share", type=float, default=0.25, help="share of request ids routed to the canary")
    p.add_argument("--fail-canary", action="store_true", help="the canary answers every request with HTTP 500")
    p.add_argument("--latency-ms", type=float, default=20, help="time each request takes")
    p.add_argument("--port-file", help="write the port listened on to this file once ready")
    p.add_argument("--verbose", action="store_true")
    return p.parse_args(argv)


def serve(opts: argparse.Namespace) -> ThreadingHTTPServer:
    handler = type("BoundHandler", (Handler,), {"options": opts})
    return ThreadingHTTPServer((opts.host, opts.port), handler)


def main(argv=None) -> None:
    opts = parse_args(argv)
    httpd = serve(opts)
    port = httpd.server_address[1]
    if opts.port_file:
        with open(opts.port_file, "w") as f:
            f.write(str(port))
    print(f"model server on http://{opts.host}:{port}/v1 (stable {opts.stable}, canary {opts.canary} "
          f"for {opts.canary_share:.0%} of requests{', failing' if opts.fail_canary else ''})", file=sys.stderr, flush=True)
    try:
        httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        httpd.server_close()


if __name__ == "__main__":
    main()
