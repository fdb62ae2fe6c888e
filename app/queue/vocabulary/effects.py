"""What a change of jobs means to those who wait for one: jobs it made claimable (waiting claims
take them), the next instant the clock makes one claimable, and jobs it finished (requests
waiting for an outcome answer). Each use case that moves jobs returns it with its result; the
caller announces it once its transaction has committed."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Generic, TypeVar

from app.queue.vocabulary.jobs import Job
from app.queue.vocabulary.states import TERMINAL, JobStatus

T = TypeVar("T")


@dataclass(frozen=True)
class Effects:
    """What a committed change did that waiters care about."""

    due: tuple[str, ...] = ()  # the type of each job made claimable now
    next_at: datetime | None = None  # the earliest later instant a job it touched comes due
    finished: frozenset[int] = frozenset()  # the jobs it finished (completed, failed, cancelled)
    any_due: bool = False  # jobs of unknown number may have become claimable (limits changed)

    def __or__(self, other: Effects) -> Effects:
        instants = [t for t in (self.next_at, other.next_at) if t is not None]
        return Effects(
            due=self.due + other.due,
            next_at=min(instants) if instants else None,
            finished=self.finished | other.finished,
            any_due=self.any_due or other.any_due,
        )

    def __bool__(self) -> bool:
        return bool(self.due or self.next_at or self.finished or self.any_due)

    @classmethod
    def of(cls, jobs: Iterable[Job], now: datetime) -> Effects:
        """The effects of ``jobs`` as a change left them: each pending job that waits for no
        parent is claimable now or at its ``run_at``; each finished job is finished."""
        due: list[str] = []
        later: list[datetime] = []
        finished: set[int] = set()
        for job in jobs:
            if job.status in TERMINAL:
                finished.add(job.id)
            elif job.status == JobStatus.PENDING and not job.waiting_for:
                if job.run_at <= now:
                    due.append(job.type)
                else:
                    later.append(job.run_at)
        return cls(tuple(due), min(later) if later else None, frozenset(finished))

    def taken(self, jobs: Iterable[Job]) -> Effects:
        """These effects once ``jobs`` were claimed in the same transaction: those are not
        claimable for anyone else."""
        due = list(self.due)
        for job in jobs:
            if job.type in due:
                due.remove(job.type)
        return replace(self, due=tuple(due))

    @classmethod
    def coming(cls, jobs: Iterable[tuple[str, datetime]], now: datetime) -> Effects:
        """The effects of pending jobs that wait for nothing, given as (type, ``run_at``)."""
        listed = list(jobs)
        later = [run_at for _, run_at in listed if run_at > now]
        due = tuple(job_type for job_type, run_at in listed if run_at <= now)
        return cls(due, min(later) if later else None)


NOTHING = Effects()


@dataclass(frozen=True)
class Changed(Generic[T]):
    """A use case's result (``value``) and what its change means to waiters (``effects``)."""

    value: T
    effects: Effects = NOTHING
