"""Request helpers shared by the pages: page-or-fragment rendering, the login guard, the actor."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from flask import current_app, make_response, redirect, render_template, request, session, url_for
from flask_login import current_user
from werkzeug.wrappers import Response

from app import access
from app.accounts.login import LOGIN_AT
from app.queue.models import Actor
from app.timeutil import utcnow


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


def login_url() -> str:
    """The login page, with ``next`` pointing back here for page requests."""
    target = request.full_path.rstrip("?") if request.method == "GET" else None
    return url_for("web.auth.login", next=target)


def require_login() -> Response | None:
    """A before-request guard: pages redirect to the login; htmx gets 401 + HX-Redirect,
    because a 302 would be followed by the browser and its login page swapped into a table."""
    if current_user.is_authenticated:
        access.check_route(current_actor(), request.endpoint)
        return None
    if request.headers.get("HX-Request") == "true":
        response = Response(status=401)
        response.headers["HX-Redirect"] = login_url()
        response.vary.add("HX-Request")
        return response
    return redirect(login_url())


def current_actor() -> Actor:
    """The signed-in user as the job service sees them."""
    return current_user.user.actor()  # type: ignore[no-any-return]


def is_fresh_login() -> bool:
    """Whether the password was checked recently enough for sensitive changes (role grants)."""
    at = session.get(LOGIN_AT)
    if not isinstance(at, int | float):
        return False
    age = utcnow().timestamp() - at
    return 0 <= age <= float(current_app.config["FRESH_LOGIN_SECONDS"])


def safe_next(value: str | None, default: str = "/ui/") -> str:
    """``value`` if it is a path on this site, else ``default`` (no open redirects)."""
    if not value or not value.startswith("/") or value.startswith(("//", "/\\")):
        return default
    if any(ord(char) < 0x20 or char == "\\" for char in value):
        return default
    parts = urlsplit(value)
    if parts.scheme or parts.netloc:
        return default
    return value
