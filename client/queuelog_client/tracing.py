"""OpenTelemetry, when ``opentelemetry-api`` is installed (the ``otel`` extra): enqueues carry
the active context's W3C headers, and each handler runs in the context its job was enqueued in.
Without it, both are no-ops."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

try:
    from opentelemetry import context as otel_context
    from opentelemetry import propagate
except ImportError:  # the extra is not installed: no tracing
    otel_context = None  # type: ignore[assignment]
    propagate = None  # type: ignore[assignment]

TRACE_HEADERS = ("traceparent", "tracestate")


def outgoing_headers() -> dict[str, str]:
    """The active context's ``traceparent`` and ``tracestate`` (empty without tracing or
    without an active span)."""
    if propagate is None:
        return {}
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return {name: carrier[name] for name in TRACE_HEADERS if name in carrier}


@contextlib.contextmanager
def job_context(trace: Any) -> Iterator[None]:
    """Run the block in the context of a claimed job's ``trace`` (``{"traceparent",
    "tracestate"}`` or None): spans started in it are children of the enqueue's span."""
    if propagate is None or otel_context is None or not isinstance(trace, dict):
        yield
        return
    carrier = {name: trace[name] for name in TRACE_HEADERS if isinstance(trace.get(name), str)}
    token = otel_context.attach(propagate.extract(carrier))
    try:
        yield
    finally:
        otel_context.detach(token)
