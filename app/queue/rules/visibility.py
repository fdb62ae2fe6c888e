"""Whose jobs an actor may see, as the store's reads take it: the one rule every read and
every report on a job applies (its owner, its holder, or everyone, per ``policy.scope``)."""

from __future__ import annotations

from sqlalchemy import ColumnElement

from app.queue.rules.policy import Scope, scope
from app.queue.sql import jobs as jobs_sql
from app.queue.vocabulary.actors import Actor


def viewer(actor: Actor) -> jobs_sql.Viewer:
    """Whose jobs ``actor`` may see, as the store's reads take it."""
    seen = scope(actor)
    if seen is Scope.ALL:
        return jobs_sql.Viewer()
    if seen is Scope.HELD:
        return jobs_sql.Viewer(holder=actor.name)
    return jobs_sql.Viewer(owner=actor.id)


def visibility(actor: Actor) -> ColumnElement[bool] | None:
    """The condition selecting the jobs ``actor`` may see (None: all of them)."""
    return viewer(actor).condition()
