"""Request bodies over MAX_CONTENT_LENGTH, announced or chunked: 413 on every route, before
anything else looks at the request, and never a silently cut body."""

from __future__ import annotations

import io
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from flask import Flask, request
from werkzeug.exceptions import RequestEntityTooLarge

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment


class ChunkedBodyLimit:
    """WSGI middleware. A body sent with ``Transfer-Encoding: chunked`` has no Content-Length,
    and werkzeug stops reading it at the limit without saying so: the app would see a truncated
    body. This reads it first (at most one byte over the limit) and hands the app a request
    with the Content-Length it had, so a body over the limit is a 413 wherever it is read,
    exactly as when its length was announced."""

    def __init__(self, app: WSGIApplication, limit: int | None) -> None:
        self.app = app
        self.limit = limit

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        chunked = "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower()
        # Only a server that de-chunks the input and ends it says wsgi.input_terminated;
        # reading a raw chunked stream from any other would block or read framing.
        if chunked and self.limit is not None and environ.get("wsgi.input_terminated"):
            body = _read_at_most(environ["wsgi.input"], self.limit + 1)
            environ["wsgi.input"] = io.BytesIO(body)
            environ["CONTENT_LENGTH"] = str(len(body))
            del environ["HTTP_TRANSFER_ENCODING"]
        return self.app(environ, start_response)


def _read_at_most(stream: Any, size: int) -> bytes:
    parts: list[bytes] = []
    left = size
    while left > 0:
        part = stream.read(min(left, 65_536))
        if not part:
            break
        parts.append(part)
        left -= len(part)
    return b"".join(parts)


def init_app(app: Flask) -> None:
    """Wrap the WSGI app for chunked bodies, and refuse an oversized body first of all (before
    authentication, CSRF or any route: the answer must not depend on the route)."""
    limit = app.config["MAX_CONTENT_LENGTH"]
    app.wsgi_app = ChunkedBodyLimit(app.wsgi_app, limit)  # type: ignore[method-assign]

    def refuse_oversized_body() -> None:
        if limit is not None and (request.content_length or 0) > limit:
            raise RequestEntityTooLarge()

    app.before_request_funcs.setdefault(None, []).insert(0, refuse_oversized_body)
