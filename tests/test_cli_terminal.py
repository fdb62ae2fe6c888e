"""``--password-stdin`` and ``set-password`` typed at a terminal: a real ``flask`` process on a
pseudo-terminal asks for the password twice without echoing it, and asks again when the two
differ (from a pipe they read one line: ``tests/test_cli.py``)."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from app import create_app
from app.infra import db
from devservers.servers import REPO, Database, app_settings, prepare_database, server_env
from tests.web.conftest import login

FLASK = Path(sys.prefix) / "bin" / "flask"
PASSWORD = "a long enough password"
# The terminal becomes the controlling terminal of the command (as a login shell's is), which
# is where a password prompt turns echo off; then the command runs in its place.
CONTROLLING = (
    "import fcntl, os, sys, termios; fcntl.ioctl(0, termios.TIOCSCTTY, 0); "
    "os.execv(sys.argv[1], sys.argv[1:])"
)


class Terminal:
    """A command whose stdin, stdout and stderr are one pseudo-terminal, and what it showed."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.master, follower = pty.openpty()
        self.process = subprocess.Popen(
            [sys.executable, "-c", CONTROLLING, *argv],
            stdin=follower,
            stdout=follower,
            stderr=follower,
            cwd=REPO,
            env=env,
            start_new_session=True,  # a session of its own, so the terminal can be its own
        )
        os.close(follower)
        self.shown = ""  # everything the terminal displayed, echo included
        self._read_up_to = 0

    def expect(self, text: str, timeout: float = 60.0) -> str:
        """Wait until the terminal shows ``text`` after what an earlier call consumed; the
        part shown meanwhile."""
        while text not in self.shown[self._read_up_to :]:
            ready, _, _ = select.select([self.master], [], [], timeout)
            assert ready, f"{text!r} never came; the terminal shows {self.shown!r}"
            try:
                chunk = os.read(self.master, 4096)
            except OSError:  # the command ended and closed the terminal
                chunk = b""
            assert chunk, f"{text!r} never came; the terminal shows {self.shown!r}"
            self.shown += chunk.decode(errors="replace")
        end = self.shown.index(text, self._read_up_to) + len(text)
        part, self._read_up_to = self.shown[self._read_up_to : end], end
        return part

    def type(self, line: str) -> None:
        os.write(self.master, f"{line}\n".encode())

    def close(self) -> int:
        """Wait for the command to end (bounded) and close the terminal; its exit code."""
        try:
            return self.process.wait(timeout=60)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait(10)
            os.close(self.master)


@pytest.fixture
def database(tmp_path: Path) -> Iterator[Database]:
    yield prepare_database(tmp_path / "db", {"eve": "producer"})


def _terminal(database: Database, *args: str) -> Terminal:
    return Terminal([str(FLASK), "--app", "app", *args], server_env(database))


def _answer(terminal: Terminal, password: str, again: str) -> None:
    """Type ``password`` at the prompt for it, then ``again`` at the one that asks again."""
    terminal.expect("Password: ")
    terminal.type(password)
    terminal.expect("Repeat for confirmation: ")
    terminal.type(again)


def _signs_in(database: Database, name: str, password: str) -> bool:
    app = create_app(app_settings(database))
    try:
        return login(app.test_client(), name, password).status_code == 302
    finally:
        db.close(app)


def test_user_create_asks_twice_unechoed_and_again_when_they_differ(database: Database) -> None:
    create = ["user", "create", "ada", "--role", "producer", "--password-stdin"]
    terminal = _terminal(database, *create)
    try:
        _answer(terminal, PASSWORD, "another long password")
        terminal.expect("do not match")
        _answer(terminal, PASSWORD, PASSWORD)
        terminal.expect("created user ada")
    finally:
        code = terminal.close()
    assert code == 0, terminal.shown
    assert PASSWORD not in terminal.shown and "another" not in terminal.shown, terminal.shown
    assert _signs_in(database, "ada", PASSWORD)


def test_set_password_asks_twice_unechoed(database: Database) -> None:
    terminal = _terminal(database, "user", "set-password", "eve")
    try:
        _answer(terminal, PASSWORD, PASSWORD)
        terminal.expect("password of eve changed")
    finally:
        code = terminal.close()
    assert code == 0, terminal.shown
    assert PASSWORD not in terminal.shown, terminal.shown
    assert _signs_in(database, "eve", PASSWORD)
