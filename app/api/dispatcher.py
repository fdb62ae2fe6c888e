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
- the other processes are told only of what this one's waiters cannot take (besides the jobs
  announced to them already and not claimed yet); where the way can name one that has waiters,
  that one claims, passing on what it cannot take, and the others keep what they know;
- what a process knows of nothing due it trusts for ``TRUST`` at most: a process that kept
  jobs for its own waiters may die, or its waiters give up, before it claims them;
- a waiter whose client has hung up (where the server can tell, ``app.serving``) is served no
  more: a job claimed for it would reach nobody and stay running until its lease ended.

The thread runs while the process has waiters; every claim it makes re-checks the waiter's
token and role in its own transaction, as the waiter's own request would.
"""

from __future__ import annotations

import collections
import os
import threading
import time
from collections.abc import Sequence
from datetime import datetime, timedelta

from flask import Flask
from prometheus_client import Counter
from sqlalchemy import Connection

from app.accounts import service as accounts
from app.api.auth import INVALID, Unauthorized
from app.api.waiters import Filter, Seen, Waiter, covers, wants
from app.infra import db
from app.infra.queue_settings import queue_settings
from app.infra.secretbox import current_box
from app.queue.rules import secret_fields
from app.queue.rules.policy import Action, require
from app.queue.usecases import claiming
from app.queue.vocabulary.actors import Actor
from app.queue.vocabulary.effects import Effects
from app.queue.vocabulary.jobs import Job
from app.queue.vocabulary.timeutil import utcnow
from app.storage.transactions import announce
from app.storage.wakeup import FALLBACK_POLL_SECONDS

EXTENSION_KEY = "queuelog.dispatcher"
# Look a little after a due instant: leases count as expired only strictly after their end.
_AFTER_DUE = timedelta(milliseconds=5)
# How long closing waits for a claim under way (its transaction is short).
_CLOSE_WITHIN = 10.0
# The longest single sleep until a due instant: a job may be due in the year 9999, further than
# the platform's clock can time a wait; the thread wakes, finds it not yet due and sleeps again.
_LONGEST_SLEEP = 3600.0
# How long "nothing is due for this filter" is trusted without a look: jobs another process
# kept for its own waiters (or was named to claim) are its to claim for that long, then this
# one's waiters look again, in case it died (or its waiters left) before claiming them.
TRUST = timedelta(seconds=5)
WAITS = Counter("queuelog_claim_waits", "Claims that found nothing due and waited.")
LOOKS = Counter(
    "queuelog_claim_looks",
    "Claim statements run for claims: by waiting requests' dispatcher or by the request itself"
    " (source), and whether they found a job (found).",
    ["source", "found"],
)


class Dispatcher:
    """This process's waiting claims and the thread that serves them.

    What it knows of the queue: the filters whose last look found nothing (``_empty``), the
    jobs announced due since and not claimed here yet, by type (``_owed``), and whether
    anything at all may have become due (``_anything``: a limit changed, a due instant came,
    another process rang without saying what). A filter is known to have nothing due while it
    is in ``_empty``, owes nothing and nothing at all happened: a look would find nothing.
    """

    def __init__(self, app: Flask) -> None:
        self._app = app
        self._cond = threading.Condition()
        self._waiters: list[Waiter] = []
        self._empty: list[Filter] = []
        self._owed: collections.Counter[str] = collections.Counter()
        self._anything = False
        self._cleared = 0  # how many times everything became unknown (``_anything`` set)
        self._announced: collections.Counter[str] = collections.Counter()  # ever, by type
        self._timer: datetime | None = None  # when the clock next makes a job claimable
        # A request found nothing more due: when will something be? (read once a claim waits)
        self._due_unknown = False
        self._pid = 0
        self._thread: threading.Thread | None = None
        self._closed = False

    # Called by requests.

    def seen(self) -> Seen:
        """Where this process's knowledge stands (listening from now on, so no ring is
        missed): read it before looking, then ``took``, ``learned`` and ``wait`` with it."""
        self._start()
        with self._cond:
            return self._seen()

    def nothing_due(self, types: Filter) -> bool:
        """Whether a look for ``types`` would find nothing: the last look of a filter covering
        it found nothing, and what it wants announced since, this process's waiters take (a
        look would race them for those jobs, and one of the two would find nothing)."""
        with self._cond:
            if not self._covered(types):
                return False
            owed = self._owed_types()
            if not (owed and wants(types, owed)):
                return True
            return self._capacity(owed) >= self._owed.total()

    def took(
        self,
        types: Filter,
        max_jobs: int,
        jobs: Sequence[Job],
        seen: Seen | None,
        held_back_until: datetime | None,
    ) -> None:
        """A request's own look for ``types`` (of ``max_jobs``, ``seen`` before it, None when
        not read) claimed ``jobs``, now committed: the dispatcher need not look for them.
        If it got fewer than it asked for, nothing more is due for its filter until the clock
        makes a job claimable: the thread learns when (a lease held elsewhere ends, a scheduled
        job comes due) once a claim waits, and limits that held jobs back say when to look
        again."""
        with self._cond:
            if self._accounted(types, max_jobs, jobs, seen) and seen is not None:
                self._due_unknown = True
                if held_back_until is not None:
                    self._set_timer(held_back_until)
                self._cond.notify()

    def wait(self, waiter: Waiter) -> Waiter:
        """Wait until ``waiter`` is served or its deadline passes."""
        WAITS.inc()
        wake = db.announcer(self._app).wake
        with self._cond:
            self._waiters.append(waiter)
            wake.waiting(True)
            self._cond.notify()
        waiter.settled.wait(max(waiter.deadline - time.monotonic(), 0))
        with self._cond:
            while waiter.serving:  # its claim is under way: the jobs are its own already
                self._cond.wait()
            if waiter in self._waiters:
                self._waiters.remove(waiter)
            wake.waiting(bool(self._waiters))
        if waiter.refused is not None:
            raise waiter.refused
        return waiter

    # Called by the announcer (``storage.transactions.Waiters``), from any thread.

    def capacity(self, due: Sequence[str]) -> int:
        with self._cond:
            takers = self._takers(due)
            room = sum(w.max_jobs for w in takers)
            owed = sum(n for t, n in self._owed.items() if any(wants(w.types, [t]) for w in takers))
            return max(room - owed, 0)

    def serve(self, effects: Effects) -> None:
        with self._cond:
            if effects.next_at is not None:
                self._set_timer(effects.next_at)
            if effects.any_due:
                self._forget_all()
            self._owed.update(effects.due)
            self._announced.update(effects.due)
            self._cond.notify()

    def close(self) -> None:
        """Stop the thread and wait for its last claim to end (tests and shutdown: the
        database's connections are closed next)."""
        with self._cond:
            self._closed = True
            self._cond.notify()
            thread = self._thread if self._pid == os.getpid() else None
        if thread is not None and thread is not threading.current_thread():
            thread.join(_CLOSE_WITHIN)

    # What it knows (with the lock held).

    def _takers(self, due: Sequence[str]) -> list[Waiter]:
        return [w for w in self._waiters if wants(w.types, due) and not w.abandoned()]

    def _capacity(self, due: Sequence[str]) -> int:
        return sum(w.max_jobs for w in self._takers(due))

    def _covered(self, types: Filter) -> bool:
        """Whether the last look of a filter covering ``types`` found nothing."""
        return not self._anything and any(covers(f, types) for f in self._empty)

    def _owed_types(self) -> list[str]:
        return [t for t, n in self._owed.items() if n > 0]

    def _known_empty(self, types: Filter) -> bool:
        owed = self._owed_types()
        return self._covered(types) and not (owed and wants(types, owed))

    def _seen(self) -> Seen:
        return Seen(self._cleared, dict(self._announced))

    def _accounted(
        self, types: Filter, max_jobs: int, jobs: Sequence[Job], seen: Seen | None
    ) -> bool:
        """A claim for ``types`` (of ``max_jobs``, ``seen`` before it) got ``jobs``: they are
        owed no more; and if it got fewer than it asked for, nothing was due for its filter
        when it looked: only the jobs announced since it began are owed. Whether it did."""
        for job in jobs:
            if self._owed[job.type] > 0:
                self._owed[job.type] -= 1
        if len(jobs) >= max_jobs:
            return False
        if seen is not None and seen.cleared == self._cleared:
            self._know_empty(types)
            for job_type in [t for t in self._owed if types is None or t in types]:
                since = self._announced[job_type] - seen.announced.get(job_type, 0)
                self._owed[job_type] = min(self._owed[job_type], since)
                if not self._owed[job_type]:
                    del self._owed[job_type]
        return True

    def _know_empty(self, types: Filter) -> None:
        """Nothing is due for ``types`` (kept once: a narrower filter is known by the wider),
        as far as this process can tell for ``TRUST``."""
        if not any(covers(f, types) for f in self._empty):
            self._empty.append(types)
        self._set_timer(utcnow() + TRUST)

    def _forget_all(self) -> None:
        self._anything, self._empty, self._cleared = True, [], self._cleared + 1
        self._owed.clear()

    def _set_timer(self, instant: datetime) -> None:
        at = instant + _AFTER_DUE
        self._timer = at if self._timer is None else min(self._timer, at)

    def _next_due_wanted(self) -> bool:
        """Whether the thread should read the next due instant: a request found nothing more
        due, and a claim waits for it (without one, nobody needs it yet)."""
        return self._due_unknown and bool(self._waiters)

    def _wanted(self, waiter: Waiter) -> bool:
        """Whether a look for ``waiter`` may find something it would receive."""
        if waiter.settled.is_set() or waiter.abandoned():
            return False
        return not self._known_empty(waiter.types)

    # The thread.

    def _start(self) -> None:
        with self._cond:
            if self._pid == os.getpid():
                return
            self._pid, self._empty, self._anything = os.getpid(), [], False
            self._owed.clear()
            self._thread = threading.Thread(
                target=self._run, name="queuelog-dispatcher", daemon=True
            )
            self._thread.start()
        db.announcer(self._app).wake.listening()  # the other processes' rings reach us

    def _run(self) -> None:
        while True:
            with self._cond:
                now = self._next_round()
                due_unknown = self._next_due_wanted()
                if due_unknown:
                    self._due_unknown = False
            if now is None:
                return
            if due_unknown:
                self._next_due(now, None)
            self._round(now)

    def _next_round(self) -> datetime | None:
        """Wait (with the lock held) until a waiter may find something; the time then (None
        once closed)."""
        while not self._closed:
            now = utcnow()
            if self._timer is not None and self._timer <= now:
                self._timer = None
                self._forget_all()  # the clock made something due: anything may be
            if any(self._wanted(w) for w in self._waiters):
                self._anything = False  # this round looks for everything that is owed
                return now
            if self._next_due_wanted():
                return now
            timeout = None
            if self._timer is not None:
                timeout = min((self._timer - now).total_seconds(), _LONGEST_SLEEP)
            if not db.announcer(self._app).wake.listening():
                timeout = min(timeout or FALLBACK_POLL_SECONDS, FALLBACK_POLL_SECONDS)
                self._forget_all()
            self._cond.wait(timeout)
        return None

    def _round(self, now: datetime) -> None:
        """Serve the waiters oldest first, one claim each, while a look for them may find
        something; then, if some filter found nothing, when the clock next makes a job due."""
        with self._cond:
            queue = list(self._waiters)
        held_back: datetime | None = None
        found_nothing = False
        for waiter in queue:
            with self._cond:
                if waiter not in self._waiters or not self._wanted(waiter):
                    continue
                waiter.serving = True
                seen = self._seen()
            claimed = self._claim(waiter)
            if claimed is None:
                continue
            with self._cond:
                if self._accounted(waiter.types, waiter.max_jobs, claimed.jobs, seen):
                    found_nothing = True
            if claimed.held_back_until is not None:
                held_back = min(held_back or claimed.held_back_until, claimed.held_back_until)
        if found_nothing:
            self._next_due(now, held_back)

    def _claim(self, waiter: Waiter) -> claiming.Taken | None:
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
            waiter.jobs, waiter.parents = claimed.jobs, claimed.parents
            LOOKS.labels("dispatcher", "yes" if claimed.jobs else "no").inc()
        except Exception as exc:  # refused (token, role) or a database failure: the waiter
            waiter.refused = exc  # answers as its own request would have
        with self._cond:
            waiter.serving = False
            if waiter.jobs or waiter.refused is not None:
                waiter.settled.set()
            self._cond.notify_all()
        return claimed

    def _recheck(self, conn: Connection, waiter: Waiter) -> Actor:
        """The waiter's actor as its token stands now: revoked or disabled, refused as a new
        request with it would be (401)."""
        found = accounts.token_owner(conn, waiter.token_hash, now=utcnow())
        if found is None:
            raise Unauthorized(INVALID)  # revoked, expired or disabled while it waited
        actor = found[1].actor()
        require(actor, Action.WORK)  # as the request's door asked it: its role may have changed
        return actor

    def _next_due(self, now: datetime, held_back: datetime | None) -> None:
        """When the clock next makes a job claimable (or limits let one go): the timer."""
        with self._app.app_context(), db.read(self._app) as conn:
            next_due = claiming.next_due_at(conn, now)
        with self._cond:
            for instant in (next_due, held_back):
                if instant is not None:
                    self._set_timer(instant)


def init_app(app: Flask) -> None:
    """Give the app a dispatcher, and its announcer the dispatcher's waiters."""
    dispatcher = Dispatcher(app)
    app.extensions[EXTENSION_KEY] = dispatcher
    db.announcer(app).waiters = dispatcher


def dispatcher_of(app: Flask) -> Dispatcher:
    """The app's dispatcher."""
    return app.extensions[EXTENSION_KEY]  # type: ignore[no-any-return]
