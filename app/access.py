"""Who may reach the routes the job service does not guard: metrics, the audit log, the
workers page, and the rule that the monitor role reads metrics and nothing else.

The API's token check and the pages' login guard both call ``check_route``.
"""

from __future__ import annotations

from app.queue.errors import Forbidden
from app.queue.models import Actor
from app.queue.states import Role

ADMINS = frozenset({Role.ADMIN})
ROUTE_ROLES: dict[str, frozenset[Role]] = {
    "api.ops.metrics": frozenset({Role.ADMIN, Role.MONITOR}),
    "api.ops.audit": ADMINS,
    "web.ops.audit": ADMINS,
    "web.ops.workers": ADMINS,
}


def check_route(actor: Actor, endpoint: str | None) -> None:
    """Refuse (403) a route the actor's role may not use."""
    allowed = ROUTE_ROLES.get(endpoint or "")
    if allowed is None:
        if actor.role is Role.MONITOR:
            raise Forbidden("the monitor role reads /metrics and nothing else")
        return
    if actor.role not in allowed:
        raise Forbidden(f"the {actor.role} role may not use this route")
