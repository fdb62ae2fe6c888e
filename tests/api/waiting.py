"""Waiting for the dispatcher: how many claims of this process found nothing and waited, and a
wait until more of them are asleep (a test that enqueues before its claim sleeps tests nothing;
a fixed sleep is too short on a busy machine)."""

from __future__ import annotations

import time

from flask import Flask
from prometheus_client import REGISTRY

from app.api.dispatcher import TRUST
from app.infra import db


def waits() -> float:
    """How many claims of this process found nothing and waited for the dispatcher so far."""
    return REGISTRY.get_sample_value("queuelog_claim_waits_total") or 0.0


def asleep(before: float, count: int, *, settle: float = 0.1) -> None:
    """Wait until ``count`` more claims wait in the dispatcher than ``before``, then ``settle``
    seconds for the last one to be asleep in its wait."""
    deadline = time.monotonic() + 10
    while waits() - before < count:
        assert time.monotonic() < deadline, f"{count} claims did not wait within 10 s"
        time.sleep(0.01)
    time.sleep(settle)


def holding_no_connection(app: Flask) -> None:
    """Assert that the app's pool has every connection back within 5 s while a claim sleeps:
    a sleeping claim holding one would keep it out for its whole wait, but the dispatcher's
    thread may be reading when the next job is due right then (a few milliseconds, longer on
    a busy machine)."""
    deadline = time.monotonic() + 5
    while db.engine(app).pool.checkedout():
        assert time.monotonic() < deadline, "a connection stayed out while the claim slept"
        time.sleep(0.01)


def relooks(since: float) -> int:
    """The looks a process's dispatcher makes on its own since ``since`` (monotonic) while a
    claim waits: one each ``TRUST`` that nothing is due, which it trusts no longer."""
    return int((time.monotonic() - since) / TRUST.total_seconds())
