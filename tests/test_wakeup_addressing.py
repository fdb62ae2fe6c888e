"""Wake-ups ``to_one``: on datagrams (real unix sockets in a folder) the message names one listener
that has requests waiting and every other listener hears that another acts on it; with no one
waiting, or on a way that cannot tell (NOTIFY, in process), everyone acts on it; a process
named to claim passes on to everyone what its own waiters cannot take; and the process that
named another keeps what it knows of nothing due rather than race the named one."""

from __future__ import annotations

import queue
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from flask import Flask

from app.api.dispatcher import dispatcher_of
from app.infra import db
from app.queue.vocabulary.effects import Effects
from app.storage.databases.datagrams import SocketWakeup
from app.storage.transactions import encode
from app.storage.wakeup import Addressee, Wakeup, naming
from tests.api.waiting import asleep, waits
from tests.builders import Api


class Listener:
    """A SocketWakeup on the folder that keeps what it hears."""

    def __init__(self, folder: Path) -> None:
        self.heard: queue.Queue[str] = queue.Queue()
        self.wake = SocketWakeup(folder, self.heard.put)
        self.wake.listening()

    def next(self) -> tuple[Addressee, str | None]:
        message = self.heard.get(timeout=5)
        return self.wake.addressee(message), self.wake.received(message)

    def quiet(self) -> bool:
        try:
            self.heard.get(timeout=0.2)
        except queue.Empty:
            return True
        return False


@pytest.fixture
def listeners(tmp_path: Path) -> Iterator[list[Listener]]:
    started = [Listener(tmp_path / "wake") for _ in range(4)]
    yield started
    for listener in started:
        listener.wake.close()


def send(sender: Listener, body: str, to_one: bool) -> bool:
    """Send as a commit does; whether a listener was named."""
    return sender.wake.after_commit(sender.wake.addressed(body, to_one=to_one))


def test_a_message_to_one_names_a_waiting_listener(listeners: list[Listener]) -> None:
    sender, waiting, idle, also_waiting = listeners
    waiting.wake.waiting(True)
    also_waiting.wake.waiting(True)
    for _ in range(20):
        assert send(sender, "jobs", to_one=True)
        heard = {
            name: listener.next()
            for name, listener in (("waiting", waiting), ("idle", idle), ("also", also_waiting))
        }
        assert {body for _, body in heard.values()} == {"jobs"}
        named = [name for name, (addressee, _) in heard.items() if addressee is Addressee.THIS_ONE]
        assert len(named) == 1 and named[0] in ("waiting", "also")
        assert heard["idle"][0] is Addressee.ANOTHER
    assert sender.quiet()  # never its own


def test_everyone_acts_when_no_one_waits_or_the_message_is_for_all(
    listeners: list[Listener],
) -> None:
    sender, first, second, third = listeners
    first.wake.waiting(True)
    first.wake.waiting(False)  # no longer: its marker is gone
    assert not send(sender, "jobs", to_one=True)
    assert [listener.next() for listener in (first, second, third)] == [
        (Addressee.EVERYONE, "jobs")
    ] * 3
    second.wake.waiting(True)
    assert not send(sender, "timer", to_one=False)
    assert [listener.next() for listener in (first, second, third)] == [
        (Addressee.EVERYONE, "timer")
    ] * 3


def test_a_dead_waiting_listener_is_removed_and_another_named(
    listeners: list[Listener], tmp_path: Path
) -> None:
    sender, alive, idle, _ = listeners
    folder = tmp_path / "wake"
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)  # bound, then closed unread
    dead.bind(str(folder / "1-dead"))
    dead.close()
    (folder / "1-dead.waiting").touch()
    alive.wake.waiting(True)
    for _ in range(5):
        send(sender, "jobs", to_one=True)
        assert alive.next() == (Addressee.THIS_ONE, "jobs")
        assert idle.next() == (Addressee.ANOTHER, "jobs")
    assert not (folder / "1-dead").exists() and not (folder / "1-dead.waiting").exists()


def test_a_closed_listener_leaves_no_marker(listeners: list[Listener], tmp_path: Path) -> None:
    listeners[1].wake.waiting(True)
    assert any(p.name.endswith(".waiting") for p in (tmp_path / "wake").iterdir())
    listeners[1].wake.close()
    assert not any(p.name.endswith(".waiting") for p in (tmp_path / "wake").iterdir())


def test_a_way_that_cannot_name_one_tells_everyone() -> None:
    sender, hearer = Wakeup(), Wakeup()
    message = sender.addressed("jobs", to_one=True)
    assert hearer.addressee(message) is Addressee.EVERYONE
    assert hearer.received(message) == "jobs"
    assert sender.received(message) is None  # its own


@pytest.mark.parametrize(("due", "passed_on"), [("email.send", True), ("report.build", False)])
def test_a_named_process_passes_on_what_its_waiters_cannot_take(
    app: Flask, worker: Api, due: str, passed_on: bool
) -> None:
    wake = db.announcer(app).wake
    assert isinstance(wake, SocketWakeup)
    before = waits()
    own = Api(app.test_client(), worker.token)  # a waiting claim on its own client and thread
    claim = threading.Thread(
        target=own.claim, kwargs={"wait_seconds": 2, "types": ["report.build"]}
    )
    claim.start()
    asleep(before, 1)
    heard: queue.Queue[str] = queue.Queue()
    other = SocketWakeup(wake.folder, heard.put)  # another server process's listener
    other.listening()
    try:
        body = encode(Effects(due=(due,)))
        wake.hear(naming(Wakeup().addressed(body, to_one=True), wake.listener))
        if passed_on:
            message = heard.get(timeout=5)
            assert other.addressee(message) is Addressee.EVERYONE
            assert other.received(message) == body
        else:
            with pytest.raises(queue.Empty):
                heard.get(timeout=0.5)
    finally:
        other.close()
        claim.join(10)


def test_jobs_named_to_another_process_leave_nothing_owed_here(
    app: Flask, producer: Api, worker: Api
) -> None:
    """A commit whose due jobs this process's waiters cannot take names another process that
    has waiters: the jobs are that one's to claim, so this one still knows that a claim would
    find nothing (counted as owed here, the next claim would race the named one for them and,
    in a trickle, find nothing about every other time). Named to no one, they are owed here."""
    wake = db.announcer(app).wake
    assert isinstance(wake, SocketWakeup)
    dispatcher = dispatcher_of(app)
    assert worker.claim(wait_seconds=0.1) is None  # a look that found nothing
    assert dispatcher.nothing_due(None)
    heard: queue.Queue[str] = queue.Queue()
    other = SocketWakeup(wake.folder, heard.put)  # another server process, with waiters
    other.listening()
    other.waiting(True)
    try:
        producer.enqueue()
        assert other.addressee(heard.get(timeout=5)) is Addressee.THIS_ONE
        assert dispatcher.nothing_due(None)
        other.waiting(False)
        producer.enqueue()
        assert other.addressee(heard.get(timeout=5)) is Addressee.EVERYONE
        assert not dispatcher.nothing_due(None)
    finally:
        other.close()
