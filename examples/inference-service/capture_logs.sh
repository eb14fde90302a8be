#!/usr/bin/env bash
# Writes the service's stdout (its JSON log lines) for 12 requests, half of
# the canary's failing, to $1; EXAMPLE_LOG_CONTRACT=broken writes the broken
# variant. cmd/loomlint/testdata holds both:
#   bash capture_logs.sh ../../cmd/loomlint/testdata/service.jsonl
#   EXAMPLE_LOG_CONTRACT=broken bash capture_logs.sh ../../cmd/loomlint/testdata/service-broken.jsonl
# Telemetry goes to a local OTLP endpoint that accepts and drops it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
out=$(realpath "$1")
PY=${EXAMPLE_PYTHON:-.venv/bin/python}
dir=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; rm -rf "$dir"' EXIT
"$PY" - "$dir/otlp" <<'PY' &
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
class Drop(BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()
    def log_message(self, *args):
        pass
server = ThreadingHTTPServer(("127.0.0.1", 0), Drop)
open(sys.argv[1], "w").write(str(server.server_address[1]))
server.serve_forever()
PY
pids+=($!)
"$PY" model_server.py --port 0 --port-file "$dir/model" --fail-canary --canary-share 0.3 2>/dev/null &
pids+=($!)
until [[ -s $dir/otlp && -s $dir/model ]]; do sleep 0.1; done
MODEL_SERVER_URL=http://127.0.0.1:$(cat "$dir/model")/v1 OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:$(cat "$dir/otlp") \
	"$PY" service.py --port 0 --port-file "$dir/service" >"$out" &
service=$!
until [[ -s $dir/service ]]; do sleep 0.1; done
for i in $(seq 12); do
	"$PY" -c 'import json, sys, urllib.request, urllib.error
req = urllib.request.Request(sys.argv[1], json.dumps({"prompt": "summarize ticket %s for the on-call" % sys.argv[2]}).encode(), {"Content-Type": "application/json"})
try: urllib.request.urlopen(req, timeout=30)
except urllib.error.HTTPError: pass' "http://127.0.0.1:$(cat "$dir/service")/v1/generate" "$i"
done
sleep 0.5
kill -TERM "$service"
wait "$service" || true
echo "$out: $(wc -l <"$out") lines"
