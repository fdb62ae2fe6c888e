"""HTTP request figures: counted per route rule (never the raw path) in every process."""

from __future__ import annotations

from time import perf_counter

from flask import Flask, Response, g, request
from prometheus_client import Counter, Histogram

REQUESTS = Counter(
    "queuelog_http_requests", "HTTP requests answered, by route and status.", ["route", "status"]
)
DURATION = Histogram(
    "queuelog_http_request_duration_seconds", "Time to answer an HTTP request.", ["route"]
)
UNMATCHED = "unmatched"  # any path no route matched (404s): raw paths would explode labels


def init_app(app: Flask) -> None:
    """Time and count every request."""

    @app.before_request
    def start_timer() -> None:
        g.request_started = perf_counter()

    @app.after_request
    def count(response: Response) -> Response:
        route = request.url_rule.rule if request.url_rule is not None else UNMATCHED
        REQUESTS.labels(route, str(response.status_code)).inc()
        if "request_started" in g:
            DURATION.labels(route).observe(perf_counter() - g.request_started)
        return response
