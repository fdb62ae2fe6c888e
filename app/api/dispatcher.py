"""Waiting claims, served by one thread per process: a claim with ``wait_seconds`` that found
nothing registers what it wants and sleeps; when jobs become claimable, the dispatcher claims
for the waiters (each as itself, its filter, its lease) and hands the jobs over.

So a job that becomes due costs about one claim statement, not one per waiter or per process:
- the dispatcher learns what became claimable (``Effects``) from this process's commits
  directly and from the other processes' messages (``app.storage.transactions``), and serves
  only the waiters whose types match; a waiter whose filter matches nothing due is not woken;
- it serves waiters oldest first, one claim each; a claim that gets fewer jobs than it asked
  for shows that nothing more is due for its filter, and the later waiters of that filter (or
  of a narrower one) are not served until something new comes: a process looks once per ring;
- what it learned ("nothing due for this filter") stays true until the next ring or the next
  instant the clock makes a job claimable, so a new claim skips a look that would find nothing;
- the other processes are told only of what this one's waiters could not take.

The thread runs while the process has waiters; every claim it makes re-checks the waiter's
token and role in its own transaction, as the waiter's own request would.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from flask import Flask
from prometheus_client import Counter
from sqlalchemy import Connection

from app.accounts import service as accounts
from app.infra import db
from app.infra.queue_settings import queue_settings
from app.infra.secretbox import current_box
from app.queue.rules import secret_fields
from app.queue.rules.policy import Action, require
from app.queue.rules.secret_fields import Secrets
from app.queue.usecases import claiming
from app.queue.vocabulary.effects import Effects
from app.queue.vocabulary.errors import QueueError
from app.queue.vocabulary.models import Actor, Job
from app.queue.vocabulary.timeutil import utcnow
from app.storage.transactions import announce
from app.storage.wakeup import FALLBACK_POLL_SECONDS

EXTENSION_KEY = "queuelog.dispatcher"
# Look a little after a due instant: leases count as expired only strictly after their end.
_AFTER_DUE = timedelta(milliseconds=5)
Filter = tuple[str, ...] | None  # a waiter's types (None: any type)

WAITS = Counter("queuelog_claim_waits", "Claims that found nothing due and waited.")
LOOKS = Counter(
    "queuelog_claim_looks",
    "Claim statements run for claims: by waiting requests' dispatcher or by the request itself"
    " (source), and whether they found a job (found).",
    ["source", "found"],
)


class TokenRefused(Exception):
    """The waiter's token was revoked, or its user disabled, while it waited."""


@dataclass(eq=False)
class Waiter:
    """One waiting claim: who asks (``actor``, re-checked by ``token_hash``), for what, until
    when (monotonic); and, once served, the jobs it got and their secrets."""

    actor: Actor
    token_hash: str
    types: Filter
    max_jobs: int
    lease_seconds: int | None
    deadline: float
    jobs: list[Job] = field(default_factory=list)
    secrets: dict[int, Secrets] = field(default_factory=dict)
    refused: Exception | None = None
    serving: bool = False  # the dispatcher is claiming for it: wait for the hand-over
    settled: threading.Event = field(default_factory=threading.Event)


def _covers(wider: Filter, narrower: Filter) -> bool:
    """Whether nothing due for ``wider`` means nothing due for ``narrower``."""
    return wider is None or (narrower is not None and set(narrower) <= set(wider))


def wants(types: Filter, due: Iterable[str]) -> bool:
    return types is None or not set(types).isdisjoint(due)


class Dispatcher:
    """This process's waiting claims and the thread that serves them."""

    def __init__(self, app: Flask) -> None:
        self._app = app
        self._cond = threading.Condition()
        self._waiters: list[Waiter] = []
        self._due: set[str] | None = set()  # types to serve next round (None: every type)
        self._timer: datetime | None = None  # when the clock next makes a job claimable
        self._empty: list[Filter] = []  # filters known to have nothing due since the last ring
        self._generation = 0  # rings heard so far
        self._pid = 0
        self._closed = False

    # Called by requests.

    def generation(self) -> int:
        """How many rings this process heard so far (listening from now on, so none is missed):
        read it before looking, then ``wait`` with it."""
        self._start()
        with self._cond:
            return self._generation

    def nothing_due(self, types: Filter) -> bool:
        """Whether the last look for a filter covering ``types`` found nothing, and no ring nor
        due instant came since (a look now would find nothing either)."""
        with self._cond:
            return any(_covers(f, types) for f in self._empty)

    def learned(self, types: Filter, next_due: datetime | None, seen: int) -> None:
        """A request's look at ring ``seen`` found nothing for ``types``: remember it (and when
        the clock next makes a job claimable), unless a ring came since."""
        with self._cond:
            if self._generation != seen:
                return
            self._empty.append(types)
            if next_due is not None:
                self._timer = min(next_due + _AFTER_DUE, self._timer or next_due + _AFTER_DUE)
                self._cond.notify()

    def wait(self, waiter: Waiter, seen: int) -> Waiter:
        """Wait until ``waiter`` is served or its deadline passes. Its request knew nothing due
        at ring ``seen`` (it looked, or ``nothing_due`` said so): a ring since is worth a look."""
        WAITS.inc()
        with self._cond:
            self._waiters.append(waiter)
            if self._generation != seen:
                self._due = None
            self._cond.notify()
        waiter.settled.wait(max(waiter.deadline - time.monotonic(), 0))
        with self._cond:
            while waiter.serving:  # its claim is under way: the jobs are its own already
                self._cond.wait()
            if waiter in self._waiters:
                self._waiters.remove(waiter)
        if waiter.refused is not None:
            raise waiter.refused
        return waiter

    # Called by the announcer (``storage.transactions.Waiters``), from any thread.

    def capacity(self, due: Sequence[str]) -> int:
        with self._cond:
            return sum(w.max_jobs for w in self._waiters if wants(w.types, due))

    def serve(self, effects: Effects) -> None:
        with self._cond:
            self._generation += 1
            if effects.next_at is not None:
                self._timer = min(effects.next_at, self._timer or effects.next_at)
            if effects.any_due:
                self._due = None
            elif effects.due and self._due is not None:
                self._due.update(effects.due)
            if effects.any_due or effects.due:
                self._forget(effects)
            self._cond.notify()

    def close(self) -> None:
        """Stop the thread (tests and shutdown)."""
        with self._cond:
            self._closed = True
            self._cond.notify()

    # The thread.

    def _forget(self, effects: Effects) -> None:
        """Drop what new due jobs make untrue (with the lock held)."""
        if effects.any_due:
            self._empty.clear()
        else:
            self._empty = [f for f in self._empty if f is not None and not wants(f, effects.due)]

    def _start(self) -> None:
        with self._cond:
            if self._pid == os.getpid():
                return
            self._pid, self._empty, self._due = os.getpid(), [], set()
            threading.Thread(target=self._run, name="queuelog-dispatcher", daemon=True).start()
        db.announcer(self._app).wake.listening()  # the other processes' rings reach us

    def _run(self) -> None:
        while True:
            with self._cond:
                found = self._next_round()
            if found is None:
                return
            self._round(*found)

    def _next_round(self) -> tuple[set[str] | None, datetime] | None:
        """Wait (with the lock held) until there is something to serve: the types newly due
        (None: every type) and the time; None once closed."""
        while not self._closed:
            waiting = [w for w in self._waiters if not w.settled.is_set()]
            now = utcnow()
            if self._timer is not None and self._timer <= now:
                self._timer, self._due, self._empty = None, None, []
            if waiting and (self._due is None or self._due):
                due, self._due = self._due, set()
                return due, now
            timeout = None
            if self._timer is not None:
                timeout = (self._timer - now).total_seconds()
            if not db.announcer(self._app).wake.listening():
                timeout = min(timeout or FALLBACK_POLL_SECONDS, FALLBACK_POLL_SECONDS)
                self._due = None
            self._cond.wait(timeout)
        return None

    def _round(self, due: set[str] | None, now: datetime) -> None:
        """Serve the waiters oldest first, one claim each, skipping the filters known to have
        nothing due; then, if some filter found nothing, when to look again."""
        with self._cond:
            queue = [w for w in self._waiters if not w.settled.is_set()]
        empty: list[Filter] = []
        held_back: datetime | None = None
        for waiter in queue:
            if due is not None and not wants(waiter.types, due):
                continue  # nothing it wants became claimable
            if any(_covers(f, waiter.types) for f in empty):
                continue
            with self._cond:
                if waiter.settled.is_set() or waiter not in self._waiters:
                    continue
                waiter.serving = True
            claimed = self._claim(waiter)
            if claimed is not None and len(claimed.jobs) < waiter.max_jobs:
                empty.append(waiter.types)
                if claimed.held_back_until is not None:
                    held_back = min(held_back or claimed.held_back_until, claimed.held_back_until)
        if empty:
            self._remember(empty, held_back, now)

    def _claim(self, waiter: Waiter) -> claiming.Claimed | None:
        """Claim for ``waiter`` in a transaction of its own, and hand the jobs over."""
        claimed = None
        try:
            with self._app.app_context(), db.transaction(self._app) as conn:
                actor = self._recheck(conn, waiter)
                claimed = claiming.claim_many(
                    conn,
                    actor,
                    now=utcnow(),
                    settings=queue_settings(self._app),
                    max_jobs=waiter.max_jobs,
                    lease_seconds=waiter.lease_seconds,
                    types=waiter.types,
                )
                box = current_box()
                waiter.secrets = secret_fields.for_holder(conn, claimed.jobs, actor.name, box)
                announce(claimed.effects)
            waiter.jobs = claimed.jobs
            LOOKS.labels("dispatcher", "yes" if claimed.jobs else "no").inc()
        except (TokenRefused, QueueError) as exc:
            waiter.refused = exc
        except Exception as exc:  # a database failure: the waiter answers as its request would
            waiter.refused = exc
        with self._cond:
            waiter.serving = False
            if waiter.jobs or waiter.refused is not None:
                waiter.settled.set()
            self._cond.notify_all()
        return claimed

    def _recheck(self, conn: Connection, waiter: Waiter) -> Actor:
        """The waiter's actor as its token stands now (revoked or disabled: refused)."""
        found = accounts.token_owner(conn, waiter.token_hash, now=utcnow())
        if found is None:
            raise TokenRefused
        return require(found[1].actor(), Action.WORK)

    def _remember(self, empty: list[Filter], held_back: datetime | None, now: datetime) -> None:
        """Note the filters that found nothing, and when the clock next makes a job claimable."""
        with self._app.app_context(), db.read(self._app) as conn:
            next_due = claiming.next_due_at(conn, now)
        instants = [t + _AFTER_DUE for t in (next_due, held_back) if t is not None]
        with self._cond:
            if self._due is None or self._due:
                return  # something came meanwhile: what we learned may be stale already
            self._empty.extend(empty)
            if instants:
                self._timer = min([*instants, *([self._timer] if self._timer else [])])


def init_app(app: Flask) -> None:
    """Give the app a dispatcher, and its announcer the dispatcher's waiters."""
    dispatcher = Dispatcher(app)
    app.extensions[EXTENSION_KEY] = dispatcher
    db.announcer(app).waiters = dispatcher


def dispatcher_of(app: Flask) -> Dispatcher:
    """The app's dispatcher."""
    return app.extensions[EXTENSION_KEY]  # type: ignore[no-any-return]
