"""Route guards: every route declares, next to it, the policy action it needs (or that it is
public or for any signed-in user); a test fails for any route that declares nothing."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar

from flask import g

from app.queue.rules.policy import Action, require
from app.queue.vocabulary.actors import Actor

PUBLIC = "public"  # no sign-in at all (static files, the sign-in page)
SIGNED_IN = "signed-in"  # any signed-in user; what they see is filtered by the service
View = TypeVar("View", bound=Callable[..., Any])


def declared(view: Callable[..., Any]) -> str | None:
    """What a view declared with ``guard`` (None: nothing)."""
    return getattr(view, "required_action", None)


def guard(current: Callable[[], Actor]) -> Callable[[Action | str], Callable[[View], View]]:
    """A ``requires(action)`` decorator for routes whose caller ``current()`` returns. It asks
    the policy before the view reads its body or does any work, refuses with the policy's 403,
    and leaves the actor in ``g.actor``: the one time a request asks (the use cases do not)."""

    def requires(action: Action | str) -> Callable[[View], View]:
        def decorate(view: View) -> View:
            @wraps(view)
            def checked(*args: Any, **kwargs: Any) -> Any:
                if isinstance(action, Action):
                    actor = current()
                    require(actor, action)
                    g.actor = actor
                return view(*args, **kwargs)

            checked.required_action = str(action)  # type: ignore[attr-defined]
            return checked  # type: ignore[return-value]

        return decorate

    return requires


def mark(marker: str) -> Callable[[View], View]:
    """Declare a route ``PUBLIC`` or ``SIGNED_IN`` without a policy check of its own."""

    def decorate(view: View) -> View:
        view.required_action = marker  # type: ignore[attr-defined]
        return view

    return decorate
