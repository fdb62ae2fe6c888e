"""A Hypothesis state machine drives ``app.queue.service`` on a real SQLite file.

Random enqueue / claim / heartbeat / complete / fail / cancel / retry / reap / clock-advance
steps by a producer, an admin and two workers are mirrored in a small model of the job state
machine; after every step the database must equal the model and the invariants must hold.
The clock is a variable the machine advances; jitter is injected (the top of its window).
"""

from __future__ import annotations

import shutil
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from sqlalchemy import Connection, Engine, select

from app.accounts import service as accounts
from app.audit.actions import Origin
from app.config import DEFAULTS
from app.queue.rules.policy import Action, require
from app.queue.rules.settings import QueueSettings
from app.queue.sql import jobs as jobs_sql
from app.queue.usecases import claiming, job_actions, reports
from app.queue.vocabulary.actors import Actor
from app.queue.vocabulary.errors import (
    Conflict,
    Forbidden,
    NotFound,
    QueueError,
)
from app.queue.vocabulary.states import PRIORITIES, TERMINAL, JobStatus
from app.storage import databases
from app.storage.schema import jobs
from devservers.accounts import AS_OPERATOR
from tests.builders import make_job

T0 = datetime(2030, 1, 1, tzinfo=UTC)
LEASE = 5
TYPE_LEASE = 8
CONFIG = DEFAULTS | {
    "JOB_TYPES": ["email.send", "report.build"],
    "LEASE_SECONDS": LEASE,
    "BACKOFF_BASE_SECONDS": 1,
    "BACKOFF_CAP_SECONDS": 4,
    "JOB_TYPE_SETTINGS": {
        "report.build": {
            "lease_seconds": TYPE_LEASE,
            "backoff_base_seconds": 2,
            "backoff_cap_seconds": 5,
        }
    },
    "RECOVER_BATCH": 1000,
}
SETTINGS = QueueSettings.from_config(CONFIG)
MAX_EXAMPLES = 100
STEPS = 30


def _engine(path: Path) -> Engine:
    """The app's engine for the SQLite file at ``path`` (NORMAL: this suite needs no fsync)."""
    database = databases.for_url(f"sqlite:///{path}")
    return database.make_engine(synchronous="NORMAL", busy_timeout_ms=10_000)


def top_of_window(low: float, high: float) -> float:
    """Injected jitter: always the top of the window, so the model can predict run_at."""
    return high


def window(job_type: str, retry: int) -> float:
    policy = CONFIG["JOB_TYPE_SETTINGS"].get(job_type, {})
    base = policy.get("backoff_base_seconds", CONFIG["BACKOFF_BASE_SECONDS"])
    cap = policy.get("backoff_cap_seconds", CONFIG["BACKOFF_CAP_SECONDS"])
    return float(min(cap, base * 2 ** (retry - 1)))


@dataclass
class Model:
    """What the queue should hold for one job."""

    id: int
    type: str
    owner: str
    priority: int
    max_retries: int
    run_at: datetime
    status: str = JobStatus.PENDING
    retry_count: int = 0
    attempts: int = 0
    worker: str | None = None
    lease_seconds: int | None = None
    lease_expires_at: datetime | None = None
    history: list[tuple[str, str]] = field(default_factory=lambda: [("enqueued", "pending")])

    def row(self) -> tuple[Any, ...]:
        return (
            self.status,
            self.attempts,
            self.retry_count,
            self.worker,
            self.run_at,
            self.lease_expires_at,
        )

    def failed_attempt(self, now: datetime, kind: str, retryable: bool, retry_in: Any) -> None:
        if retryable and self.retry_count < self.max_retries:
            self.retry_count += 1
            delay = retry_in if retry_in is not None else window(self.type, self.retry_count)
            self.status, self.run_at = JobStatus.PENDING, now + timedelta(seconds=delay)
        else:
            self.status = JobStatus.FAILED
        self.worker, self.lease_expires_at = None, None
        self.history.append((kind, self.status))


def _at_the_door(
    actor: Actor, action: Action, use_case: Callable[[Connection], Any]
) -> Callable[[Connection], Any]:
    """A use case as a route runs it: the policy asks the caller's role first (403), once."""

    def run(conn: Connection) -> Any:
        require(actor, action)
        return use_case(conn)

    return run


class QueueMachine(RuleBasedStateMachine):
    """The job service against the model; one fresh SQLite file per example."""

    examples = 0
    steps = 0
    outcomes: Counter[str] = Counter()

    def __init__(self, template: Path, workdir: Path, actors: dict[str, Actor]) -> None:
        super().__init__()
        QueueMachine.examples += 1
        self.path = workdir / f"example-{QueueMachine.examples}.sqlite3"
        shutil.copy(template, self.path)
        self.engine: Engine = _engine(self.path)
        self.actors = actors
        self.now = T0
        self.model: dict[int, Model] = {}
        self.retried_now: set[int] = set()
        self.seen_status: dict[int, str] = {}
        self.seen_attempts: dict[int, int] = {}

    def teardown(self) -> None:
        self.engine.dispose()
        for suffix in ("", "-wal", "-shm"):
            Path(f"{self.path}{suffix}").unlink(missing_ok=True)

    # --- helpers ---------------------------------------------------------------------------

    def _run(self, expected: type[QueueError] | None, action: Any) -> Any:
        """Run ``action(conn)`` in a write transaction; it must raise ``expected`` (or not)."""
        QueueMachine.steps += 1
        self.retried_now = set()
        try:
            with self.engine.begin() as conn:
                result = action(conn)
        except QueueError as exc:
            QueueMachine.outcomes[type(exc).__name__] += 1
            assert expected is not None and isinstance(exc, expected), (expected, exc)
            return None
        QueueMachine.outcomes["ok"] += 1
        assert expected is None, f"expected {expected.__name__}, got {result}"
        return result

    def _pick(self, index: int) -> Model:
        ids = sorted(self.model)
        return self.model[ids[index % len(ids)]]

    def _recover(self) -> None:
        expired = [
            m
            for m in self.model.values()
            if m.status == JobStatus.RUNNING and m.lease_expires_at < self.now  # type: ignore[operator]
        ]
        for m in sorted(expired, key=lambda m: (m.lease_expires_at, m.id)):
            m.failed_attempt(self.now, "lease_expired", True, None)

    def _holder_problem(
        self, actor: Actor, m: Model, attempt: int | None
    ) -> type[QueueError] | None:
        if m.status == JobStatus.CANCELLED:
            return Conflict
        if m.status != JobStatus.RUNNING or m.worker != actor.name:
            return Conflict
        if attempt is not None and attempt != m.attempts:
            return Conflict
        return None

    @staticmethod
    def _attempt(m: Model, mode: str) -> int | None:
        return {"none": None, "current": m.attempts, "stale": m.attempts - 1}.get(
            mode, m.attempts + 1
        )

    # --- rules -----------------------------------------------------------------------------

    @rule(
        who=st.sampled_from(["producer", "admin"]),
        job_type=st.sampled_from(["email.send", "report.build"]),
        priority=st.sampled_from(["low", "medium"]),
        max_retries=st.integers(0, 2),
        delay=st.sampled_from([None, 0, 3, 10]),
    )
    def enqueue(
        self, who: str, job_type: str, priority: str, max_retries: int, delay: int | None
    ) -> None:
        body: dict[str, Any] = {"type": job_type, "priority": priority, "max_retries": max_retries}
        if delay is not None:
            body["delay_seconds"] = delay
        actor = self.actors[who]
        job = self._run(None, lambda conn: make_job(conn, actor, SETTINGS, now=self.now, **body))
        assert job.id not in self.model
        self.model[job.id] = Model(
            id=job.id,
            type=job_type,
            owner=who,
            priority=PRIORITIES[priority],
            max_retries=max_retries,
            run_at=self.now + timedelta(seconds=delay or 0),
        )

    @rule(who=st.sampled_from(["w1", "w2", "admin"]), lease=st.sampled_from([None, 2, 7]))
    def claim(self, who: str, lease: int | None) -> None:
        actor = self.actors[who]
        job = self._run(
            None,
            lambda conn: claiming.claim(
                conn,
                actor,
                now=self.now,
                settings=SETTINGS,
                lease_seconds=lease,
                uniform=top_of_window,
            ),
        )
        self._recover()
        due = [m for m in self.model.values() if m.status == "pending" and m.run_at <= self.now]
        if not due:
            assert job is None
            return
        head = min(due, key=lambda m: (-m.priority, m.run_at, m.id))
        assert job is not None and job.id == head.id, (job, head)
        head.status, head.worker, head.attempts = JobStatus.RUNNING, who, head.attempts + 1
        head.lease_seconds = lease or (TYPE_LEASE if head.type == "report.build" else LEASE)
        head.lease_expires_at = self.now + timedelta(seconds=head.lease_seconds)
        head.history.append(("claimed", "running"))

    @precondition(lambda self: self.model)
    @rule(
        who=st.sampled_from(["w1", "w2", "admin"]),
        index=st.integers(0, 100),
        mode=st.sampled_from(["none", "current", "current", "stale", "future"]),
        progress=st.integers(0, 100),
    )
    def heartbeat(self, who: str, index: int, mode: str, progress: int) -> None:
        actor, m = self.actors[who], self._pick(index)
        attempt = self._attempt(m, mode)
        problem = self._holder_problem(actor, m, attempt)
        self._run(
            problem,
            lambda conn: (
                reports.heartbeat(
                    conn,
                    actor,
                    m.id,
                    now=self.now,
                    settings=SETTINGS,
                    progress=progress,
                    message="working",
                    attempt=attempt,
                ).value
            ),
        )
        if problem is None:
            m.lease_expires_at = self.now + timedelta(seconds=m.lease_seconds or 0)

    @precondition(lambda self: self.model)
    @rule(
        who=st.sampled_from(["w1", "w2", "admin"]),
        index=st.integers(0, 100),
        mode=st.sampled_from(["none", "current", "current", "stale", "future"]),
    )
    def complete(self, who: str, index: int, mode: str) -> None:
        actor, m = self.actors[who], self._pick(index)
        attempt = self._attempt(m, mode)
        problem = self._holder_problem(actor, m, attempt)
        self._run(
            problem,
            lambda conn: (
                reports.complete(
                    conn, actor, m.id, now=self.now, result={"n": m.id}, attempt=attempt
                ).value
            ),
        )
        if problem is None:
            m.status, m.lease_expires_at = JobStatus.COMPLETED, None
            m.history.append(("completed", "completed"))

    @precondition(lambda self: self.model)
    @rule(
        who=st.sampled_from(["w1", "w2", "admin"]),
        index=st.integers(0, 100),
        mode=st.sampled_from(["none", "current", "current", "stale"]),
        retryable=st.booleans(),
        retry_in=st.sampled_from([None, None, 0, 2.5]),
    )
    def fail(self, who: str, index: int, mode: str, retryable: bool, retry_in: Any) -> None:
        actor, m = self.actors[who], self._pick(index)
        attempt = self._attempt(m, mode)
        problem = self._holder_problem(actor, m, attempt)
        self._run(
            problem,
            lambda conn: (
                reports.fail(
                    conn,
                    actor,
                    m.id,
                    now=self.now,
                    settings=SETTINGS,
                    error="password=hunter2 boom",
                    attempt=attempt,
                    retry_in=retry_in,
                    retryable=retryable,
                    uniform=top_of_window,
                ).value
            ),
        )
        if problem is None:
            will_retry = retryable and m.retry_count < m.max_retries
            m.failed_attempt(
                self.now, "retry_scheduled" if will_retry else "failed", retryable, retry_in
            )

    @precondition(lambda self: self.model)
    @rule(who=st.sampled_from(["producer", "admin", "w1"]), index=st.integers(0, 100))
    def cancel(self, who: str, index: int) -> None:
        actor, m = self.actors[who], self._pick(index)
        allowed = {"pending", "running"} if who == "admin" else {"pending"}
        problem: type[QueueError] | None = None
        if who == "w1":
            problem = Forbidden
        elif who == "producer" and m.owner != "producer":
            problem = NotFound
        elif m.status not in allowed:
            problem = Conflict
        self._run(
            problem,
            _at_the_door(
                actor,
                Action.CANCEL,
                lambda conn: (
                    job_actions.cancel(
                        conn, actor, m.id, now=self.now, origin=Origin(actor.name)
                    ).value
                ),
            ),
        )
        if problem is None:
            m.status, m.lease_expires_at = JobStatus.CANCELLED, None
            m.history.append(("cancelled", "cancelled"))

    @precondition(lambda self: self.model)
    @rule(who=st.sampled_from(["admin", "admin", "producer"]), index=st.integers(0, 100))
    def retry(self, who: str, index: int) -> None:
        actor, m = self.actors[who], self._pick(index)
        problem: type[QueueError] | None = None
        if who != "admin":
            problem = Forbidden
        elif m.status not in ("failed", "cancelled"):
            problem = Conflict
        self._run(
            problem,
            _at_the_door(
                actor,
                Action.RETRY,
                lambda conn: (
                    job_actions.retry(
                        conn, actor, m.id, now=self.now, origin=Origin(actor.name)
                    ).value
                ),
            ),
        )
        if problem is None:
            m.status, m.retry_count, m.run_at = JobStatus.PENDING, 0, self.now
            m.worker, m.lease_expires_at = None, None
            m.history.append(("retried", "pending"))
            self.retried_now = {m.id}

    @rule()
    def reap(self) -> None:
        recovered = self._run(
            None,
            lambda conn: (
                claiming.recover_expired(
                    conn, now=self.now, settings=SETTINGS, limit=1000, uniform=top_of_window
                ).value
            ),
        )
        before = sum(1 for m in self.model.values() if m.status == "running")
        self._recover()
        after = sum(1 for m in self.model.values() if m.status == "running")
        assert recovered == before - after

    @rule(seconds=st.sampled_from([0.5, 1, 2, 3, 5, 8, 13]))
    def advance_clock(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)
        self.retried_now = set()

    # --- invariants ------------------------------------------------------------------------

    def _read(self, conn: Connection) -> tuple[dict[int, Any], dict[int, list[Any]]]:
        rows = {row.id: row for row in conn.execute(select(jobs))}
        events = {job_id: jobs_sql.list_events(conn, job_id) for job_id in rows}
        return rows, events

    @invariant()
    def database_matches_model_and_invariants_hold(self) -> None:
        with self.engine.connect() as conn:
            rows, events = self._read(conn)
        # job count conserved; every job in exactly one known status
        assert set(rows) == set(self.model)
        by_status = Counter(row.status for row in rows.values())
        assert set(by_status) <= set(JobStatus) and sum(by_status.values()) == len(self.model)
        for job_id, row in rows.items():
            m = self.model[job_id]
            actual = (
                row.status,
                row.attempts,
                row.retry_count,
                row.worker_id,
                row.run_at,
                row.lease_expires_at,
            )
            assert actual == m.row(), (job_id, actual, m)
            # a running job has a worker and a lease
            if row.status == JobStatus.RUNNING:
                assert row.worker_id and row.lease_expires_at is not None
            # attempt monotonic
            assert row.attempts >= self.seen_attempts.get(job_id, 0)
            self.seen_attempts[job_id] = row.attempts
            # terminal states are final, except through an admin retry
            before = self.seen_status.get(job_id)
            if before in TERMINAL and row.status != before:
                assert job_id in self.retried_now, (job_id, before, row.status)
            self.seen_status[job_id] = row.status
            # the event log tells the same story, and a job completes at most once
            history = [(e.kind, e.to_status) for e in events[job_id]]
            assert history == m.history, (job_id, history, m.history)
            assert history[-1][1] == row.status
            completions = sum(1 for kind, _ in history if kind == "completed")
            assert completions == (1 if row.status == JobStatus.COMPLETED else 0)
            assert all("hunter2" not in (e.error or "") for e in events[job_id])
            assert row.retry_count <= row.max_retries


@pytest.fixture
def users_template(migrated_template: Path, tmp_path: Path) -> tuple[Path, dict[str, Actor]]:
    """The migrated schema plus a producer, an admin and two workers."""
    path = tmp_path / "template.sqlite3"
    shutil.copy(migrated_template, path)
    engine = _engine(path)
    actors = {}
    with engine.begin() as conn:
        for name, role in [
            ("producer", "producer"),
            ("admin", "admin"),
            ("w1", "worker"),
            ("w2", "worker"),
        ]:
            user = accounts.create_user(
                conn, accounts.OPERATOR, name, role, now=T0, origin=AS_OPERATOR
            )
            actors[name] = user.actor()
    engine.dispose()
    return path, actors


@pytest.mark.slow
def test_queue_state_machine(users_template: tuple[Path, dict[str, Actor]], tmp_path: Path) -> None:
    template, actors = users_template
    QueueMachine.examples = QueueMachine.steps = 0
    QueueMachine.outcomes = Counter()
    run_state_machine_as_test(
        lambda: QueueMachine(template, tmp_path, actors),
        settings=settings(
            max_examples=MAX_EXAMPLES,
            stateful_step_count=STEPS,
            deadline=None,
            database=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
    print(
        f"\nstateful: {QueueMachine.examples} examples, {QueueMachine.steps} service calls, "
        f"outcomes {dict(QueueMachine.outcomes)}; lost or duplicated: none (checked every step)"
    )
    assert QueueMachine.examples >= MAX_EXAMPLES
