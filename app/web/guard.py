"""The pages' login guard, the signed-in user as the services see them, and the pages' one
route guard (``requires``)."""

from __future__ import annotations

from flask import redirect, request, url_for
from flask_login import current_user
from werkzeug.wrappers import Response

from app.infra import access
from app.queue.vocabulary.actors import Actor


def login_url() -> str:
    """The login page, with ``next`` pointing back here for page requests."""
    target = request.full_path.rstrip("?") if request.method == "GET" else None
    return url_for("web.auth.login", next=target)


def require_login() -> Response | None:
    """A before-request guard: pages redirect to the login; htmx gets 401 + HX-Redirect,
    because a 302 would be followed by the browser and its login page swapped into a table."""
    if current_user.is_authenticated:
        return None
    if request.headers.get("HX-Request") == "true":
        response = Response(status=401)
        response.headers["HX-Redirect"] = login_url()
        response.vary.add("HX-Request")
        return response
    return redirect(login_url())


def current_actor() -> Actor:
    """The signed-in user as the use cases see them."""
    return current_user.user.actor()  # type: ignore[no-any-return]


# Every page route declares its action with this (see ``app.infra.access``).
requires = access.guard(current_actor)
