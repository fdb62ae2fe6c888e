"""Whose jobs an actor may see, as the store's reads take it: the one rule every read and
every report on a job applies (its owner, its holder, or everyone, per ``policy.scope``)."""

from __future__ import annotations

from sqlalchemy import ColumnElement

from app.queue.domain.models import Actor
from app.queue.domain.policy import Scope, scope
from app.queue.engines import jobs as store


def viewer(actor: Actor) -> store.Viewer:
    """Whose jobs ``actor`` may see, as the store's reads take it."""
    seen = scope(actor)
    if seen is Scope.ALL:
        return store.Viewer()
    if seen is Scope.HELD:
        return store.Viewer(holder=actor.name)
    return store.Viewer(owner=actor.id)


def visibility(actor: Actor) -> ColumnElement[bool] | None:
    """The condition selecting the jobs ``actor`` may see (None: all of them)."""
    return viewer(actor).condition()
