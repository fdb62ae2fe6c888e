"""Wake-ups across processes and app servers: commits that make a job due ring waiting claims.

Each process has one ``Bell`` (a generation counter under a condition) that its waiting requests
sleep on, and one listener thread that rings it when another process says a job became due:

* PostgreSQL: the writing transaction issues ``NOTIFY`` (delivered only if it commits) and each
  process keeps one ``LISTEN`` connection, reconnecting after failures.
* SQLite: each waiting process binds a unix datagram socket in a folder beside the database file;
  after a commit the writer sends one byte to every socket there. No polling: an idle waiter and
  an idle listener are blocked in the kernel.

Nothing here knows about Flask; ``app/db.py`` binds it to the app's transactions, and the
statements that make a job due mark their connection with ``JOB_DUE``.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import secrets
import socket
import threading
from collections.abc import Callable, Hashable, Iterator
from pathlib import Path

from sqlalchemy import Connection
from sqlalchemy.engine import make_url

CHANNEL = "queuelog_wake"
# Set in a connection's info by a statement that made a job due: ``app/db.py``'s transaction
# helper rings once that transaction commits.
JOB_DUE = "queuelog_wake"
# Likewise the ids of the jobs a statement finished: requests waiting for their outcome wake.
JOB_DONE = "queuelog_done"
# A message names what happened (e.g. the ids of the jobs that finished); "" says "anything".
# A longer one goes as "": a NOTIFY payload holds under 8,000 bytes.
MAX_MESSAGE = 7900
Hear = Callable[[str], None]
# While a listener is down, waiters look again this often so nothing due is missed for long.
FALLBACK_POLL_SECONDS = 0.5
_RECONNECT_DELAYS = (0.05, 0.2, 0.5, 1.0, 2.0)


class Bell:
    """A generation counter: ``ring()`` wakes everyone waiting on a generation already seen."""

    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._generation = 0

    def generation(self) -> int:
        """The current generation; read it before looking for work, then ``wait`` on it."""
        with self._condition:
            return self._generation

    def ring(self) -> None:
        """Wake every waiter."""
        with self._condition:
            self._generation += 1
            self._condition.notify_all()

    def wait(self, seen: int, timeout: float) -> bool:
        """Sleep until a ring after generation ``seen`` or ``timeout``; True when rung."""
        with self._condition:
            return self._condition.wait_for(lambda: self._generation != seen, max(timeout, 0))


class Turn:
    """Waiters of one kind that the same ring woke take turns to look (``gate``); one that
    finds nothing leaves a note, so the others need not look again before the next ring: a ring
    then costs a process one or two looks, however many of its waiters sleep."""

    def __init__(self) -> None:
        self.gate = threading.Lock()
        self._lock = threading.Lock()
        self._empty_at = -1
        self._note: object = None

    def found_nothing(self, generation: int, note: object) -> None:
        """A look that began at ``generation`` found nothing; ``note`` is what else it learned."""
        with self._lock:
            if generation >= self._empty_at:
                self._empty_at, self._note = generation, note

    def nothing_since(self, generation: int) -> tuple[bool, object]:
        """Whether a look that began at ``generation`` or later found nothing, and its note."""
        with self._lock:
            return self._empty_at >= generation, self._note


class Wakeup:
    """In-process only (an in-memory database): commits ring this process's bell. ``hear``
    receives each message instead, when given (by default any message rings the bell)."""

    def __init__(self, hear: Hear | None = None) -> None:
        self.bell = Bell()
        self.hear: Hear = hear or (lambda _message: self.bell.ring())
        self._turns: dict[Hashable, Turn] = {}
        self._turns_lock = threading.Lock()

    def turn(self, kind: Hashable) -> Turn:
        """This process's turn for waiters of ``kind``."""
        with self._turns_lock:
            return self._turns.setdefault(kind, Turn())

    def listening(self) -> bool:
        """Start this process's listener if needed; True when no wake-up can be missed."""
        return True

    def generation(self) -> int:
        """Start listening, then return the bell's generation (read it before looking for work)."""
        self.listening()
        return self.bell.generation()

    def wait(self, seen: int, timeout: float) -> bool:
        """Sleep until woken or ``timeout``; shorter while the listener is down."""
        if not self.listening():
            timeout = min(timeout, FALLBACK_POLL_SECONDS)
        return self.bell.wait(seen, timeout)

    def in_transaction(self, conn: Connection, message: str = "") -> None:
        """Called inside a transaction that made a job due, just before it commits."""

    def after_commit(self, message: str = "") -> None:
        """Called after that transaction committed."""
        self.hear(message)

    def close(self) -> None:
        """Stop listening (tests and shutdown)."""


class SocketWakeup(Wakeup):
    """SQLite: one unix datagram socket per waiting process in ``folder``."""

    def __init__(self, folder: Path, hear: Hear | None = None) -> None:
        super().__init__(hear)
        self.folder = folder
        self._lock = threading.Lock()
        self._pid = 0
        self._name = ""
        self._receiver: socket.socket | None = None

    @contextlib.contextmanager
    def _opened(self) -> Iterator[int]:
        """The folder's descriptor: socket paths are limited to 108 bytes, folders are not, so
        sockets are named through ``/proc/self/fd/N/``."""
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(self.folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            yield fd
        finally:
            os.close(fd)

    def listening(self) -> bool:
        with self._lock:
            if self._pid != os.getpid():  # the first wait in this process (or since a fork)
                self._name = f"{os.getpid()}-{secrets.token_hex(4)}"
                receiver = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
                with self._opened() as fd:
                    receiver.bind(f"/proc/self/fd/{fd}/{self._name}")
                self._receiver, self._pid = receiver, os.getpid()
                threading.Thread(
                    target=self._listen, args=(receiver,), name="queuelog-wakeup", daemon=True
                ).start()
                atexit.register(self._unlink_own)
        return True

    def _listen(self, receiver: socket.socket) -> None:
        with receiver, contextlib.suppress(OSError):
            while data := receiver.recv(MAX_MESSAGE + 1):  # close() sends an empty datagram
                self.hear("" if data == b"!" else data.decode("ascii", "replace"))

    def after_commit(self, message: str = "") -> None:
        self.hear(message)
        own = self._name if self._pid == os.getpid() else ""
        try:
            waiters = [name for name in os.listdir(self.folder) if name != own]
        except FileNotFoundError:
            return  # no process has waited on this database yet
        if not waiters:
            return  # the common case: no claim is waiting, nothing to open
        with self._opened() as fd, socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sender:
            sender.setblocking(False)
            for name in waiters:
                path = f"/proc/self/fd/{fd}/{name}"
                try:
                    sender.sendto(message.encode("ascii") or b"!", path)
                except BlockingIOError:
                    pass  # its queue is full of wake-ups it has not read yet: it is awake anyway
                except (ConnectionRefusedError, FileNotFoundError):
                    with contextlib.suppress(OSError):
                        os.unlink(path)  # left behind by a process that died
                except OSError:
                    pass  # e.g. another user's socket: a wake-up is a hint, the commit stands

    def _unlink_own(self) -> None:
        if self._pid == os.getpid():
            with contextlib.suppress(OSError):
                os.unlink(self.folder / self._name)

    def close(self) -> None:
        with self._lock:
            if self._receiver is not None and self._pid == os.getpid():
                with self._opened() as fd, socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
                    s.sendto(b"", f"/proc/self/fd/{fd}/{self._name}")
                self._unlink_own()
            self._receiver, self._pid = None, 0


class PostgresWakeup(Wakeup):
    """PostgreSQL: NOTIFY in the writing transaction, one LISTEN connection per process."""

    def __init__(self, conninfo: str, channel: str = CHANNEL, hear: Hear | None = None) -> None:
        super().__init__(hear)
        self.conninfo = conninfo
        self.channel = channel
        self._lock = threading.Lock()
        self._pid = 0
        self._ready = threading.Event()
        self._stop = threading.Event()

    def listening(self) -> bool:
        with self._lock:
            if self._pid != os.getpid():
                self._pid = os.getpid()
                self._ready = threading.Event()
                self._stop = threading.Event()
                threading.Thread(target=self._listen, name="queuelog-listen", daemon=True).start()
                self._ready.wait(2.0)  # the first claim should not have to poll
        return self._ready.is_set()

    def _listen(self) -> None:
        import psycopg  # here: only PostgreSQL deployments need it

        failures = 0
        while not self._stop.is_set():
            try:
                with psycopg.connect(self.conninfo, autocommit=True, connect_timeout=5) as conn:
                    conn.execute(f"LISTEN {self.channel}")
                    self._ready.set()
                    failures = 0
                    self.hear("")  # anything committed while we were not listening
                    while not self._stop.is_set():
                        for notice in conn.notifies(timeout=1.0):
                            self.hear(notice.payload)
            except (psycopg.Error, OSError):
                self._ready.clear()
                delay = _RECONNECT_DELAYS[min(failures, len(_RECONNECT_DELAYS) - 1)]
                failures += 1
                self._stop.wait(delay)

    def in_transaction(self, conn: Connection, message: str = "") -> None:
        if message:
            conn.exec_driver_sql(
                "SELECT pg_notify(%(c)s, %(m)s)", {"c": self.channel, "m": message}
            )
        else:
            conn.exec_driver_sql(f"NOTIFY {self.channel}")

    def after_commit(self, message: str = "") -> None:
        """The NOTIFY comes back to this process's listener, which rings the bell: ringing here
        too would wake this process's waiters twice. Only while it is down (its waiters poll)."""
        if not (self._pid == os.getpid() and self._ready.is_set()):
            self.hear(message)

    def close(self) -> None:
        self._stop.set()


def for_database(url: str, topic: str = "wake", hear: Hear | None = None) -> Wakeup:
    """The wake-up mechanism for the database at ``url``: for claims (``topic`` "wake"), or
    another topic with its own channel or folder, so its messages reach only its listeners."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "postgresql":
        plain = parsed.set(drivername="postgresql")
        conninfo = plain.render_as_string(hide_password=False)
        return PostgresWakeup(conninfo, f"queuelog_{topic}", hear)
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
        return SocketWakeup(Path(f"{parsed.database}.{topic}"), hear)
    return Wakeup(hear)
