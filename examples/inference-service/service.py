"""An inference API the way the Loom seed documents recommend writing one.

- A req_id middleware: X-Request-ID when the client sends one, else
  req-{unix_ms}-{6 lowercase alnum}; returned in the response's X-Request-ID.
- contextvars (through structlog's) carry req_id, stage, input_hash and
  model_ver into asyncio tasks and, copied explicitly, into a thread pool.
- structlog writes JSON lines with the golden fields to stdout and, through
  the OpenTelemetry logging bridge, as OTLP logs (same JSON as the body).
- The model call goes through the real `openai` client to a local
  OpenAI-compatible server, instrumented by OpenLLMetry and OpenInference
  with content capture on.
- After the response, background work (an asyncio task and a worker pool
  job) continues the request in a NEW trace that keeps req_id and links to
  the request's span.

Environment: MODEL_SERVER_URL (http://127.0.0.1:8000/v1),
OTEL_EXPORTER_OTLP_ENDPOINT (http://127.0.0.1:4318), SERVICE_NAME
(inference-api); --port, --port-file on the command line.
"""

import argparse
import asyncio
import contextlib
import contextvars
import hashlib
import logging
import os
import secrets
import socket
import string
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import openai
import structlog
import uvicorn
from fastapi import BackgroundTasks, FastAPI, Request
from fastapi.responses import JSONResponse
from openinference.instrumentation.openai import OpenAIInstrumentor as OpenInferenceInstrumentor
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry._logs import set_logger_provider
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.instrumentation.openai import OpenAIInstrumentor as OpenLLMetryInstrumentor
from opentelemetry.sdk._logs import LoggerProvider, LoggingHandler
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

SERVICE_NAME = os.environ.get("SERVICE_NAME", "inference-api")
MODEL_SERVER_URL = os.environ.get("MODEL_SERVER_URL", "http://127.0.0.1:8000/v1")
MODEL = os.environ.get("MODEL", "llama3-8b")
# EXAMPLE_LOG_CONTRACT=broken writes the logs a service that ignores the
# contract writes (cmd/loomlint's test): no req_id on the records of the
# pipeline stages, the raw prompt logged, latencies as text.
BROKEN = os.environ.get("EXAMPLE_LOG_CONTRACT") == "broken"

req_id_var: contextvars.ContextVar[str] = contextvars.ContextVar("req_id", default="")
ALNUM = string.ascii_lowercase + string.digits


def new_req_id() -> str:
    return f"req-{int(time.time() * 1000)}-{''.join(secrets.choice(ALNUM) for _ in range(6))}"


def input_hash(text: str) -> str:
    """First 8 hex of sha256 over the whitespace-normalized input, computed before any text leaves."""
    return hashlib.sha256(" ".join(text.split()).encode()).hexdigest()[:8]


# ---- telemetry ----------------------------------------------------------------
resource = Resource.create({"service.name": SERVICE_NAME, "service.version": "1.0.0"})
tracer_provider = TracerProvider(resource=resource)
tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
trace.set_tracer_provider(tracer_provider)
logger_provider = LoggerProvider(resource=resource)
logger_provider.add_log_record_processor(BatchLogRecordProcessor(OTLPLogExporter()))
set_logger_provider(logger_provider)
tracer = trace.get_tracer("examples.inference-service")

# Both LLM instrumentations, as many teams run them; content capture is on
# by default in both (TRACELOOP_TRACE_CONTENT, OPENINFERENCE_HIDE_INPUTS).
OpenLLMetryInstrumentor().instrument(tracer_provider=tracer_provider)
OpenInferenceInstrumentor().instrument(tracer_provider=tracer_provider)

def add_service(_logger, _method, event_dict):
    """Every line names its service, uvicorn's own lines included."""
    event_dict.setdefault("service", SERVICE_NAME)
    return event_dict


json_formatter = structlog.stdlib.ProcessorFormatter(
    processor=structlog.processors.JSONRenderer(),
    foreign_pre_chain=[structlog.contextvars.merge_contextvars, add_service, structlog.stdlib.add_log_level, structlog.processors.TimeStamper(fmt="iso", key="ts")],
)
stdout_handler = logging.StreamHandler(sys.stdout)
stdout_handler.setFormatter(json_formatter)
class OTelHandler(LoggingHandler):
    """The logging bridge, without the private fields structlog passes to its formatter."""

    @staticmethod
    def _get_attributes(record):
        return {k: v for k, v in LoggingHandler._get_attributes(record).items() if not k.startswith("_")}


otel_handler = OTelHandler(level=logging.INFO, logger_provider=logger_provider)
otel_handler.setFormatter(json_formatter)  # the OTLP body is the same JSON line
root = logging.getLogger()
root.handlers = [stdout_handler, otel_handler]
root.setLevel(logging.INFO)
for noisy in ("uvicorn.access", "httpx", "httpx2", "httpcore", "openai"):
    logging.getLogger(noisy).setLevel(logging.WARNING)
structlog.configure(
    processors=[
        structlog.contextvars.merge_contextvars,
        add_service,
        structlog.stdlib.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", key="ts"),
        structlog.processors.format_exc_info,
        structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
    ],
    logger_factory=structlog.stdlib.LoggerFactory(),
    wrapper_class=structlog.stdlib.BoundLogger,
    cache_logger_on_first_use=True,
)
log = structlog.get_logger("inference")

# ---- the service ----------------------------------------------------------------
@contextlib.asynccontextmanager
async def lifespan(_app):
    yield
    # SIGTERM: finish the background work, then flush what it logged
    workers.shutdown(wait=True)
    tracer_provider.shutdown()
    logger_provider.shutdown()


app = FastAPI(title="loom example inference service", lifespan=lifespan)
llm = openai.AsyncOpenAI(base_url=MODEL_SERVER_URL, api_key=os.environ.get("OPENAI_API_KEY", "sk-local-example"), max_retries=0, timeout=10)
workers = ThreadPoolExecutor(max_workers=4, thread_name_prefix="worker")


@app.middleware("http")
async def req_id_middleware(request: Request, call_next):
    rid = request.headers.get("X-Request-ID") or new_req_id()
    structlog.contextvars.clear_contextvars()
    structlog.contextvars.bind_contextvars(req_id=rid)
    req_id_var.set(rid)
    with tracer.start_as_current_span(f"{request.method} {request.url.path}", kind=SpanKind.SERVER,
                                      attributes={"req_id": rid, "stage": "gateway/request", "http.request.method": request.method}) as span:
        log.info("received request", path=request.url.path)  # template noise: no golden fields but req_id
        start = time.perf_counter()
        response = await call_next(request)
        latency = (time.perf_counter() - start) * 1000
        span.set_attribute("http.response.status_code", response.status_code)
        span.set_attribute("resource_usage.latency_ms", round(latency, 2))
        if response.status_code >= 500:
            span.set_status(Status(StatusCode.ERROR, f"HTTP {response.status_code}"))
        response.headers["X-Request-ID"] = rid
        log.info("request finished", stage="gateway/response", status_code=response.status_code, **{"resource_usage.latency_ms": round(latency, 2)})
        return response


def tokenize(text: str) -> int:
    """Runs in the worker pool; the copied context keeps req_id."""
    with tracer.start_as_current_span("preproc.tokenize", attributes={"req_id": req_id_var.get(), "stage": "preproc/tokenize"}):
        tokens = len(text.split())
        log.info("tokenized input", stage="preproc/tokenize", **{"resource_usage.tokens": tokens})
        return tokens


async def normalize(text: str) -> str:
    """Runs as its own asyncio task; tasks copy the context when created."""
    with tracer.start_as_current_span("preproc.normalize", attributes={"req_id": req_id_var.get(), "stage": "preproc/normalize"}):
        normalized = " ".join(text.split())
        structlog.contextvars.bind_contextvars(input_hash=input_hash(normalized))
        if BROKEN:
            structlog.contextvars.unbind_contextvars("req_id", "input_hash")
            log.info("normalized input", stage="Preproc.Normalize", prompt=text, latency_ms="0.1ms")
            return normalized
        log.info("normalized input", stage="preproc/normalize", **{"resource_usage.latency_ms": 0.1})
        return normalized


@app.post("/v1/generate")
async def generate(body: dict, background: BackgroundTasks):
    parent = trace.get_current_span().get_span_context()
    prompt = str(body.get("prompt", ""))
    normalized = await asyncio.create_task(normalize(prompt))
    if BROKEN:
        structlog.contextvars.unbind_contextvars("req_id")
    else:
        # the task's bindings stay in its context: bind input_hash here too
        structlog.contextvars.bind_contextvars(input_hash=input_hash(normalized))
    loop = asyncio.get_running_loop()
    tokens = await loop.run_in_executor(workers, contextvars.copy_context().run, tokenize, normalized)

    start = time.perf_counter()
    try:
        raw = await llm.chat.completions.with_raw_response.create(
            model=body.get("model", MODEL), max_tokens=64,
            messages=[{"role": "system", "content": "Answer in one line."}, {"role": "user", "content": normalized}],
            extra_headers={"X-Request-ID": req_id_var.get()},
        )
    except openai.APIStatusError as e:
        version = e.response.headers.get("x-model-version", body.get("model", MODEL))
        log.error("model call failed", stage="model/forward", model_ver=version, status_code=e.status_code, error_type=type(e).__name__,
                  **{"resource_usage.latency_ms": round((time.perf_counter() - start) * 1000, 2)})
        background.add_task(workers.submit, contextvars.copy_context().run, audit, parent, 0)
        return JSONResponse({"error": "model server error", "model_ver": version, "req_id": req_id_var.get()}, status_code=502)
    completion = raw.parse()
    latency = round((time.perf_counter() - start) * 1000, 2)
    structlog.contextvars.bind_contextvars(model_ver=completion.model)
    log.info("model call finished", stage="model/forward", **{"resource_usage.latency_ms": latency, "resource_usage.tokens": tokens,
             "resource_usage.output_tokens": completion.usage.completion_tokens})
    text = completion.choices[0].message.content or ""
    log.info("postprocessed output", stage="postproc/filter", output_length=len(text), **{"resource_usage.latency_ms": 0.2})

    background.add_task(continue_in_new_trace, parent, len(text))
    return {"req_id": req_id_var.get(), "model_ver": completion.model, "completion_chars": len(text)}


def detached_span(name: str, stage: str, parent):
    """A span in a new trace: detached work keeps req_id and links to its request."""
    return tracer.start_as_current_span(name, context=otel_context.Context(), kind=SpanKind.CONSUMER,
                                        links=[Link(parent)], attributes={"req_id": req_id_var.get(), "stage": stage})


async def continue_in_new_trace(parent, chars: int) -> None:
    with detached_span("cache.write", "cache/write", parent):
        await asyncio.sleep(0.005)
        log.info("cached the response", stage="cache/write", **{"resource_usage.latency_ms": 5})
    ctx = contextvars.copy_context()
    workers.submit(ctx.run, audit, parent, chars)


def audit(parent, chars: int) -> None:
    with detached_span("audit.write", "async/audit", parent):
        log.info("wrote audit record", stage="async/audit", chars=chars, **{"resource_usage.latency_ms": 1})


@app.get("/health")
async def health():
    return {"status": "ok"}


def main() -> None:
    p = argparse.ArgumentParser(description="the example inference API")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8080)
    p.add_argument("--port-file", help="write the port listened on to this file once ready")
    args = p.parse_args()
    # Listen first, so that --port 0 can say which port it got before serving.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((args.host, args.port))
    sock.listen(128)  # connections wait in the backlog until uvicorn accepts them
    if args.port_file:
        with open(args.port_file + ".tmp", "w") as f:
            f.write(str(sock.getsockname()[1]))
        os.replace(args.port_file + ".tmp", args.port_file)
    uvicorn.Server(uvicorn.Config(app, log_config=None, lifespan="on")).run(sockets=[sock])


if __name__ == "__main__":
    main()
