"""Claims for the API's routes (``POST /jobs/claim`` and the claim of ``POST /jobs/finish``): a
look in the request's own transaction, then, when nothing was due and the caller waits, a
wait for this process's dispatcher to serve it (``app.api.dispatcher``), holding nothing.

A request skips its own look when the dispatcher knows it would find nothing (no ring since
the last look for that filter): the look that finds nothing costs as much as one that finds a
job, and a steady stream of workers asking for their next job would pay it once per job.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from datetime import datetime
from types import MappingProxyType
from typing import NamedTuple

from flask import current_app, request
from sqlalchemy import Connection

from app.api import auth
from app.api.admission import admission
from app.api.dispatcher import LOOKS, dispatcher_of
from app.api.waiters import Seen, Waiter, wants
from app.infra import db
from app.infra.queue_settings import poll_notes, queue_settings
from app.infra.secretbox import current_box
from app.queue.rules import secret_fields
from app.queue.rules.secret_fields import Secrets
from app.queue.usecases import claiming, type_polls
from app.queue.vocabulary.actors import Actor
from app.queue.vocabulary.effects import NOTHING, Effects
from app.queue.vocabulary.jobs import Job, ParentResult, Wanted
from app.queue.vocabulary.timeutil import utcnow
from app.serving import CLIENT_WATCH, ClientWatch
from app.storage.transactions import announce


class Claim(NamedTuple):
    """What a claim got (the jobs, and the secrets of those that have some, by job id); whether
    it was refused a wait; what the parents of the jobs that depend on others returned, by job
    id; when type limits held due jobs back, when to look again."""

    jobs: list[Job]
    secrets: dict[int, Secrets]
    refused_wait: bool = False
    parents: Mapping[int, list[ParentResult]] = MappingProxyType({})
    held_back_until: datetime | None = None


def knowledge() -> Seen:
    """Where the dispatcher's knowledge stands: read before deciding whether to look."""
    return dispatcher_of(current_app._get_current_object()).seen()  # type: ignore[attr-defined]


def report_taken(wanted: Wanted, found: Claim, seen: Seen | None) -> None:
    """A look's transaction committed: the dispatcher need not look for the jobs it took."""
    app = current_app._get_current_object()  # type: ignore[attr-defined]
    dispatcher = dispatcher_of(app)
    dispatcher.took(wanted.types, wanted.max_jobs, found.jobs, seen, found.held_back_until)


def worth_a_look(wanted: Wanted, effects: Effects) -> bool:
    """Whether a look may find a job: not when the caller would wait anyway and the dispatcher
    knows nothing is due for its types, unless ``effects`` (this request's own commit) made
    some of them claimable."""
    if not wanted.wait_seconds:
        return True
    if effects.any_due or (effects.due and wants(wanted.types, effects.due)):
        return True
    app = current_app._get_current_object()  # type: ignore[attr-defined]
    return not dispatcher_of(app).nothing_due(wanted.types)


def look(conn: Connection, actor: Actor, wanted: Wanted) -> Claim:
    """One claim in the caller's transaction, the jobs' secrets opened in it (a failure to open
    them rolls the claim back); what recovering expired leases did is announced."""
    claimed = claiming.claim_many(
        conn,
        actor,
        now=utcnow(),
        settings=queue_settings(),
        max_jobs=wanted.max_jobs,
        lease_seconds=wanted.lease_seconds,
        types=wanted.types,
        polls=poll_notes(),
    )
    secrets = secret_fields.for_holder(conn, claimed.jobs, actor.name, current_box())
    announce(claimed.effects)
    LOOKS.labels("request", "yes" if claimed.jobs else "no").inc()
    return Claim(
        claimed.jobs, secrets, parents=claimed.parents, held_back_until=claimed.held_back_until
    )


def wait(wanted: Wanted) -> Claim:
    """Wait up to ``wanted.wait_seconds`` for the dispatcher to claim for the caller, holding
    no transaction; only when admitted (``app.api.admission``), else refused at once."""
    actor = auth.current_actor()
    with admission().waiting(auth.caller_key()) as admitted:
        if not admitted:
            return Claim([], {}, refused_wait=True)
        waiter = Waiter(
            actor=actor,
            token_hash=auth.caller_key(),
            types=wanted.types,
            max_jobs=wanted.max_jobs,
            lease_seconds=wanted.lease_seconds,
            deadline=time.monotonic() + wanted.wait_seconds,
            gone=_client_gone(),
        )
        app = current_app._get_current_object()  # type: ignore[attr-defined]
        served = dispatcher_of(app).wait(waiter)
        return Claim(served.jobs, served.secrets, parents=served.parents)


def _client_gone() -> threading.Event | None:
    """An event set once the caller hangs up, where the server can tell (``app.serving``)."""
    watch: ClientWatch | None = request.environ.get(CLIENT_WATCH)
    return None if watch is None else watch.start()


def claim(wanted: Wanted) -> Claim:
    """``POST /jobs/claim``: a look in a transaction of its own (skipped when nothing is due
    for the caller, who waits anyway), then, if the caller waits, the wait."""
    seen = knowledge() if wanted.wait_seconds else None
    found = None
    if worth_a_look(wanted, NOTHING):
        with db.transaction() as conn:
            found = look(conn, auth.current_actor(), wanted)
        report_taken(wanted, found, seen)
        if found.jobs or seen is None:
            return found
    elif poll_notes().stale(wanted.types or queue_settings().job_types, utcnow()):
        with db.transaction() as conn:
            note_poll(conn, wanted)
    return wait(wanted) if seen is not None else Claim([], {})


def note_poll(conn: Connection, wanted: Wanted) -> None:
    """A claim that skipped its look still tells the explainer that a worker asks for its
    types (once per interval per process and type)."""
    type_polls.note(conn, poll_notes(), wanted.types or queue_settings().job_types, utcnow())
