"""HTTP request figures: counted per route rule (never the raw path) in every process."""

from __future__ import annotations

from time import perf_counter
from typing import Any

from flask import Flask, Response, g, request
from prometheus_client import Counter, Histogram

REQUESTS = Counter(
    "queuelog_http_requests", "HTTP requests answered, by route and status.", ["route", "status"]
)
DURATION = Histogram(
    "queuelog_http_request_duration_seconds", "Time to answer an HTTP request.", ["route"]
)
UNMATCHED = "unmatched"  # any path no route matched (404s): raw paths would explode labels
# The labelled series of each (route, status), looked up once per process rather than per
# request (a few dozen routes times a handful of statuses).
_series: dict[tuple[str, int], tuple[Any, Any]] = {}


def _of(route: str, status: int) -> tuple[Any, Any]:
    found = _series.get((route, status))
    if found is None:
        found = _series[(route, status)] = (
            REQUESTS.labels(route, str(status)),
            DURATION.labels(route),
        )
    return found


def init_app(app: Flask) -> None:
    """Time and count every request."""

    @app.before_request
    def start_timer() -> None:
        g.request_started = perf_counter()

    @app.after_request
    def count(response: Response) -> Response:
        rule = request.url_rule
        requests, duration = _of(rule.rule if rule is not None else UNMATCHED, response.status_code)
        requests.inc()
        started = g.get("request_started")
        if started is not None:
            duration.observe(perf_counter() - started)
        return response
