"""The W3C trace context of a request (``traceparent``, ``tracestate``), which every enqueue
route stores with its jobs so the worker that claims them can continue the trace."""

from __future__ import annotations

from flask import request

from app.queue.vocabulary.trace import Trace, read_trace

# W3C trace context, read by every enqueue (a malformed one is ignored, never refused).
TRACE_HEADERS = {
    "traceparent": {"type": "string", "description": "W3C traceparent (version 00)"},
    "tracestate": {"type": "string", "description": "W3C tracestate (kept up to 512 chars)"},
}


def request_trace() -> Trace | None:
    """The request's W3C trace context, or None when absent or malformed (never an error).
    Two traceparent headers are malformed; several tracestate headers are one list."""
    parents = request.headers.getlist("traceparent")
    states = request.headers.getlist("tracestate")
    return read_trace(
        parents[0] if len(parents) == 1 else None, ",".join(states) if states else None
    )
