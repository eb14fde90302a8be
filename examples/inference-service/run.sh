#!/usr/bin/env bash
# `make example`: the model server on 127.0.0.1:8000 (its canary version
# failing), the service on 127.0.0.1:8080 sending OTLP to the collector of
# `make run` (127.0.0.1:4318), and a mix of healthy and failing requests.
# The two keep running until Ctrl-C.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
PY=${EXAMPLE_PYTHON:-.venv/bin/python}
MODEL_PORT=${MODEL_PORT:-8000}
SERVICE_PORT=${SERVICE_PORT:-8080}
export OTEL_EXPORTER_OTLP_ENDPOINT=${OTEL_EXPORTER_OTLP_ENDPOINT:-http://127.0.0.1:4318}
export MODEL_SERVER_URL=http://127.0.0.1:$MODEL_PORT/v1

pids=()
trap 'kill "${pids[@]}" 2>/dev/null; wait' EXIT
"$PY" model_server.py --port "$MODEL_PORT" --fail-canary &
pids+=($!)
"$PY" service.py --port "$SERVICE_PORT" > service.log &
pids+=($!)
echo "service on http://127.0.0.1:$SERVICE_PORT (its JSON logs in $(pwd)/service.log); sending to $OTEL_EXPORTER_OTLP_ENDPOINT"
for _ in $(seq 120); do
	"$PY" -c "import urllib.request,sys; urllib.request.urlopen(sys.argv[1], timeout=1)" "http://127.0.0.1:$SERVICE_PORT/health" 2>/dev/null && break
	sleep 0.5
done
for i in $(seq 20); do
	"$PY" - "$SERVICE_PORT" "$i" <<'PY'
import json, sys, urllib.error, urllib.request
port, i = sys.argv[1], sys.argv[2]
req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/generate", json.dumps({"prompt": f"summarize ticket {i}"}).encode(), {"Content-Type": "application/json"})
try:
    resp = urllib.request.urlopen(req, timeout=30)
except urllib.error.HTTPError as e:
    resp = e
body = json.load(resp)
print(f"HTTP {resp.status}  {resp.headers['X-Request-ID']}  {body.get('model_ver')}")
PY
done
echo "the failing requests all went to the canary version (llama3-8b-v2.2.0); Ctrl-C stops the service and the model server"
wait
