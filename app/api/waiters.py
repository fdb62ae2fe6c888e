"""What a waiting claim is, as the dispatcher (``app.api.dispatcher``) and the claims' routes
(``app.api.claims``) share it: its filter of types, the waiter itself, and where a process's
knowledge of the queue stood when a look began."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

from app.queue.rules.secret_fields import Secrets
from app.queue.vocabulary.actors import Actor
from app.queue.vocabulary.jobs import Job, ParentResult

Filter = tuple[str, ...] | None  # a waiter's types (None: any type)


class Seen(NamedTuple):
    """Where a process's knowledge stood: how many times everything became unknown, and how
    many jobs of each type had been announced."""

    cleared: int
    announced: dict[str, int]


@dataclass(eq=False)
class Waiter:
    """One waiting claim: who asks (``actor``, re-checked by ``token_hash``), for what, until
    when (monotonic); and, once served, the jobs it got, their secrets and their parents'
    results."""

    actor: Actor
    token_hash: str
    types: Filter
    max_jobs: int
    lease_seconds: int | None
    deadline: float
    jobs: list[Job] = field(default_factory=list)
    secrets: dict[int, Secrets] = field(default_factory=dict)
    parents: dict[int, list[ParentResult]] = field(default_factory=dict)
    refused: Exception | None = None
    serving: bool = False  # the dispatcher is claiming for it: wait for the hand-over
    settled: threading.Event = field(default_factory=threading.Event)
    gone: threading.Event | None = None  # set if its client hangs up (where the server can tell)

    def abandoned(self) -> bool:
        """Whether its client has hung up: the jobs claimed for it would reach nobody, and
        stay running until their lease ends."""
        return self.gone is not None and self.gone.is_set()


def covers(wider: Filter, narrower: Filter) -> bool:
    """Whether nothing due for ``wider`` means nothing due for ``narrower``."""
    return wider is None or (narrower is not None and set(narrower) <= set(wider))


def wants(types: Filter, due: Iterable[str]) -> bool:
    return types is None or not set(types).isdisjoint(due)
