"""Captures the spans that LLM instrumentation libraries really emit.

Runs the example model server in-process, calls it with the real `openai`
client instrumented by one library, and writes the finished spans as OTLP
JSON (the shape the collector's file exporter writes) to
<out>/<library>-<version>.json: one successful call and one that the
failing canary answers with HTTP 500. internal/golden's convention tests
read these files, so what Loom maps is what the libraries emit.

    python capture_conventions.py --library openllmetry --out ../../internal/golden/testdata/conventions
    python capture_conventions.py --library openinference --out ...
"""

import argparse
import importlib.metadata
import json
import os
import sysconfig
import threading

import model_server
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

LIBRARIES = {
    "openllmetry": "opentelemetry-instrumentation-openai",
    "openinference": "openinference-instrumentation-openai",
}


def instrument(library: str, provider: TracerProvider) -> None:
    if library == "openllmetry":
        from opentelemetry.instrumentation.openai import OpenAIInstrumentor
    else:
        from openinference.instrumentation.openai import OpenAIInstrumentor
    OpenAIInstrumentor().instrument(tracer_provider=provider)


def any_value(v):
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, float):
        return {"doubleValue": v}
    if isinstance(v, (list, tuple)):
        return {"arrayValue": {"values": [any_value(x) for x in v]}}
    # stack traces name this machine's paths; the fixtures should not
    return {"stringValue": str(v).replace(sysconfig.get_paths()["purelib"], "site-packages")}


def attributes(attrs) -> list:
    return [{"key": k, "value": any_value(v)} for k, v in (attrs or {}).items()]


def otlp_json(spans, library: str, version: str) -> dict:
    status_codes = {"UNSET": 0, "OK": 1, "ERROR": 2}
    out = []
    for s in spans:
        out.append({
            "traceId": format(s.context.trace_id, "032x"),
            "spanId": format(s.context.span_id, "016x"),
            "parentSpanId": format(s.parent.span_id, "016x") if s.parent else "",
            "name": s.name,
            "kind": s.kind.value + 1,
            "startTimeUnixNano": str(s.start_time),
            "endTimeUnixNano": str(s.end_time),
            "attributes": attributes(s.attributes),
            "events": [{"timeUnixNano": str(e.timestamp), "name": e.name, "attributes": attributes(e.attributes)} for e in s.events],
            "status": {"code": status_codes[s.status.status_code.name], "message": s.status.description or ""},
        })
    scope = spans[0].instrumentation_scope if spans else None
    return {"resourceSpans": [{
        "resource": {"attributes": attributes({"service.name": "capture", "loom.fixture.library": f"{LIBRARIES[library]}=={version}"})},
        "scopeSpans": [{"scope": {"name": scope.name if scope else "", "version": scope.version if scope else ""}, "spans": out}],
    }]}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--library", choices=sorted(LIBRARIES), required=True)
    p.add_argument("--out", required=True)
    args = p.parse_args()

    opts = model_server.parse_args(["--port", "0", "--latency-ms", "1", "--canary-share", "0.5", "--fail-canary"])
    httpd = model_server.serve(opts)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrument(args.library, provider)
    import openai

    client = openai.OpenAI(base_url=f"http://127.0.0.1:{httpd.server_address[1]}/v1", api_key="sk-local-example", max_retries=0)
    messages = [{"role": "system", "content": "Answer in one line."}, {"role": "user", "content": "RAW-PROMPT-FIXTURE summarize the quarterly report"}]
    ok = failed = 0
    for i in range(64):
        if ok and failed:
            break
        request_id = f"req-1715234890123-fix{i:03d}"
        try:
            client.chat.completions.create(model=opts.model, messages=messages, max_tokens=64, temperature=0.2, extra_headers={"X-Request-ID": request_id})
            ok += 1
        except openai.APIStatusError:
            failed += 1
    httpd.shutdown()

    version = importlib.metadata.version(LIBRARIES[args.library])
    spans = exporter.get_finished_spans()
    # keep the first success and the first failure
    keep, seen = [], set()
    for s in spans:
        outcome = s.status.status_code.name == "ERROR"
        if outcome not in seen:
            seen.add(outcome)
            keep.append(s)
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, f"{args.library}-{version}.json")
    with open(path, "w") as f:
        json.dump(otlp_json(keep, args.library, version), f, indent=1)
        f.write("\n")
    print(f"{path}: {len(keep)} spans from {LIBRARIES[args.library]}=={version} (openai=={importlib.metadata.version('openai')})")


if __name__ == "__main__":
    main()
