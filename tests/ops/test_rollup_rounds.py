"""The scrape's fold of new events into the totals, in rounds of ``BATCH`` events and at most
``MAX_ROUNDS`` of them a scrape: a backlog longer than that is caught up by the next scrapes,
every event counted once (the bounds made small here, so that a few jobs cross them)."""

from __future__ import annotations

import pytest
from flask import Flask

from app.infra import db
from app.monitoring import rollup
from tests.backends import every_backend  # noqa: F401 (run on both engines)
from tests.harness import make_queue


def _fold_and_count(app: Flask) -> float:
    """One scrape's fold; the enqueued total of ``email.send`` after it."""
    with app.app_context(), db.transaction(app) as conn:
        rollup.roll_up(conn)
    with app.app_context(), db.read(app) as conn:
        return rollup.totals(conn).get((rollup.ENQUEUED, "email.send", ""), 0.0)


def test_a_backlog_beyond_one_scrape_is_folded_over_the_next_ones_each_event_once(
    app: Flask, backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rollup, "BATCH", 2)
    monkeypatch.setattr(rollup, "MAX_ROUNDS", 2)
    queue = make_queue(app)
    for _ in range(5):
        queue.enqueue()
    assert _fold_and_count(app) == 4  # two rounds of two
    assert _fold_and_count(app) == 5  # the rest
    assert _fold_and_count(app) == 5  # nothing new: nothing counted twice
    queue.enqueue()
    assert _fold_and_count(app) == 6
