"""htmx rendering: the whole page or only its fragment, decided by the HX-Request header."""

from __future__ import annotations

from typing import Any

from flask import make_response, render_template, request
from werkzeug.wrappers import Response


def is_htmx() -> bool:
    """True when htmx asks for a fragment (a history restore needs the whole page)."""
    return (
        request.headers.get("HX-Request") == "true"
        and request.headers.get("HX-History-Restore-Request") != "true"
    )


def render(page: str, partial: str, /, *, status: int = 200, **context: Any) -> Response:
    """Render the full page, or only its fragment for htmx; caches must key on HX-Request."""
    template = partial if is_htmx() else page
    response = make_response(render_template(template, **context), status)
    response.vary.add("HX-Request")
    return response
