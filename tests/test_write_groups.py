"""SQLite writers of one process that wait at once share one transaction and one commit, and
each returns only once that commit holds its work; a writer that fails loses its work alone."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from flask import Flask
from sqlalchemy import event

from app.infra import db
from app.storage.databases.write_groups import (
    HANDOVER_GRACE,
    MAX_GROUP,
    GroupFailed,
    WriterTurns,
)


class Refused(Exception):
    """A writer's own failure, after it wrote."""


@pytest.fixture
def probe(app: Flask) -> Iterator[list[int]]:
    """A table to write into, and the number of COMMITs the app's engine has sent since."""
    with app.app_context(), db.transaction() as conn:
        conn.exec_driver_sql("CREATE TABLE probe (writer TEXT NOT NULL)")
    commits = [0]

    def count(_conn: object) -> None:
        commits[0] += 1

    event.listen(db.engine(app), "commit", count)
    yield commits
    event.remove(db.engine(app), "commit", count)


def committed(path: Path) -> set[str]:
    """The writers whose rows another connection sees: only committed work."""
    with sqlite3.connect(path) as other:
        return {writer for (writer,) in other.execute("SELECT writer FROM probe")}


def writer(app: Flask, name: str, *, fail: bool = False) -> Callable[[], None]:
    def write() -> None:
        with app.app_context(), db.transaction() as conn:
            conn.exec_driver_sql("INSERT INTO probe (writer) VALUES (?)", (name,))
            if fail:
                raise Refused(name)

    return write


def run_behind_a_holder(
    app: Flask, writers: dict[str, Callable[[], None]], *, holder_fails: bool = False
) -> tuple[dict[str, BaseException | None], dict[str, set[str]]]:
    """``first`` writes and keeps its turn until every other writer waits for one; then all
    finish. Returns each writer's error and the committed rows each saw once it returned."""
    turns: WriterTurns = db.transactions(app).writers
    holding, others_wait = threading.Event(), threading.Event()
    errors: dict[str, BaseException | None] = {}
    seen: dict[str, set[str]] = {}
    path = Path(db.engine(app).url.database or "")

    def first() -> None:
        with app.app_context(), db.transaction() as conn:
            conn.exec_driver_sql("INSERT INTO probe (writer) VALUES ('first')")
            holding.set()
            assert others_wait.wait(10)
            if holder_fails:
                raise Refused("first")

    def track(name: str, body: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                body()
                errors[name] = None
            except BaseException as exc:  # reported to the test
                errors[name] = exc
            seen[name] = committed(path)

        return run

    threads = [threading.Thread(target=track("first", first))]
    threads[0].start()
    assert holding.wait(10)
    for name, body in writers.items():
        threads.append(threading.Thread(target=track(name, body)))
        threads[-1].start()
    deadline = time.monotonic() + 30  # threads start slowly on a busy machine
    while turns.waiting < len(writers):
        # a writer that came after the holder let go would commit apart, and the count of
        # COMMITs would say nothing of the groups
        assert time.monotonic() < deadline, f"{turns.waiting} of {len(writers)} writers wait"
        time.sleep(0.001)
    others_wait.set()
    for thread in threads:
        thread.join(10)
    return errors, seen


def test_writers_waiting_at_once_share_one_commit(
    app: Flask, database_path: Path, probe: list[int]
) -> None:
    names = ["b", "c", "d"]
    errors, seen = run_behind_a_holder(app, {n: writer(app, n) for n in names})
    assert errors == dict.fromkeys(["first", *names])
    assert probe[0] == 1  # four writers, one commit
    everyone = {"first", *names}
    assert all(seen[name] == everyone for name in seen)  # none returned before the commit


def test_a_failing_writer_loses_its_own_work_alone(
    app: Flask, database_path: Path, probe: list[int]
) -> None:
    errors, seen = run_behind_a_holder(
        app, {"b": writer(app, "b"), "bad": writer(app, "bad", fail=True), "d": writer(app, "d")}
    )
    assert isinstance(errors["bad"], Refused)
    assert errors["first"] is errors["b"] is errors["d"] is None
    assert committed(database_path) == {"first", "b", "d"}
    assert seen["b"] == seen["d"] == {"first", "b", "d"}
    assert probe[0] == 1


def test_when_the_first_writer_fails_the_waiting_ones_still_commit(
    app: Flask, database_path: Path, probe: list[int]
) -> None:
    errors, _ = run_behind_a_holder(
        app, {"b": writer(app, "b"), "c": writer(app, "c")}, holder_fails=True
    )
    assert isinstance(errors["first"], Refused)
    assert errors["b"] is errors["c"] is None
    assert committed(database_path) == {"b", "c"}


def test_a_group_holds_at_most_max_group_writers(
    app: Flask, database_path: Path, probe: list[int]
) -> None:
    names = [f"w{n}" for n in range(MAX_GROUP + 3)]
    errors, _ = run_behind_a_holder(app, {n: writer(app, n) for n in names})
    assert set(errors.values()) == {None}
    assert committed(database_path) == {"first", *names}
    # The first group is full at MAX_GROUP, so the rest commit apart: one commit more at least
    # (two, or three on a machine so busy that a woken writer takes its turn only after the
    # writer before it gave up waiting, HANDOVER_GRACE, and committed its group itself).
    assert probe[0] >= 2


def test_a_lone_writer_commits_at_once(app: Flask, database_path: Path, probe: list[int]) -> None:
    writer(app, "alone")()
    assert committed(database_path) == {"alone"}
    assert probe[0] == 1


def test_when_a_writer_ends_the_transaction_the_writers_before_it_fail(
    app: Flask, database_path: Path, probe: list[int]
) -> None:
    """Some errors (a full disk, say) make SQLite roll the whole transaction back: the work of
    the writers before is lost with it, so they raise instead of answering success."""

    def end_it() -> None:
        with app.app_context(), db.transaction() as conn:
            conn.exec_driver_sql("INSERT INTO probe (writer) VALUES ('ender')")
            conn.connection.driver_connection.execute("ROLLBACK")  # type: ignore[union-attr]
            raise Refused("ender")

    errors, _ = run_behind_a_holder(app, {"ender": end_it})
    assert isinstance(errors["ender"], Refused)
    assert isinstance(errors["first"], GroupFailed)
    assert committed(database_path) == set()
    writer(app, "after")()  # the next writer begins a group of its own
    assert committed(database_path) == {"after"}


def test_a_transaction_handed_to_no_one_is_committed_by_the_writer_that_handed_it(
    app: Flask, database_path: Path, probe: list[int]
) -> None:
    """A waiter counted as the turn is handed over may give up at that moment (its busy
    timeout passed): the writer that handed the transaction over then commits it itself."""
    turns: WriterTurns = db.transactions(app).writers
    turns._waiting += 1  # that waiter, which no thread can be made to be on cue
    started = time.monotonic()
    try:
        writer(app, "alone")()
    finally:
        turns._waiting -= 1
    assert HANDOVER_GRACE <= time.monotonic() - started < 5
    assert committed(database_path) == {"alone"}
    assert probe[0] == 1
