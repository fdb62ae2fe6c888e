"""Wake-ups across processes and app servers: a committed change tells the other processes on
the database what it did, so their waiting requests need not poll.

How processes reach each other is the database's own way (``app.storage.databases``: a
notification sent by the writing transaction, or a datagram to each listening process's socket
beside the database file); this module holds what every way shares and ``Wakeup``, the
in-process one they extend (a database no other process opens). A message names the process
that sent it, so a process never acts on its own: what its own commits did it learns directly
(``app.storage.transactions``).

Nothing here knows about Flask or about jobs: a message is text the topic's listener reads.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable

from sqlalchemy import Connection

# A notification's payload holds under 8,000 bytes; a longer message goes as "" ("anything").
MAX_MESSAGE = 7900
Hear = Callable[[str], None]
# While a listener is down, waiters look again this often so nothing due is missed for long.
FALLBACK_POLL_SECONDS = 0.5
_SEPARATOR = "|"
_process: tuple[int, str] = (0, "")


def process_name() -> str:
    """This process's name in the messages it sends: its pid and a random part, anew after a
    fork (pids are reused across hosts and restarts, the random part is not)."""
    global _process
    if _process[0] != os.getpid():
        _process = (os.getpid(), f"{os.getpid()}.{secrets.token_hex(4)}")
    return _process[1]


def addressed(body: str) -> str:
    """``body`` as this process sends it ("" when too long: it then means "anything")."""
    message = f"{process_name()}{_SEPARATOR}{body}"
    return message if len(message) <= MAX_MESSAGE else f"{process_name()}{_SEPARATOR}"


def received(message: str) -> str | None:
    """The body of a message another process sent (None for this process's own)."""
    sender, separator, body = message.partition(_SEPARATOR)
    if not separator:
        return ""  # a bare ring (a listener that reconnected says "anything may have happened")
    return None if sender == process_name() else body


def body_of(message: str) -> str:
    """The body of a message, whoever sent it."""
    return message.partition(_SEPARATOR)[2]


class Wakeup:
    """In-process only: there is no other process to tell. ``hear`` receives each message
    another process sends (with its sender: ``received`` reads it)."""

    def __init__(self, hear: Hear | None = None) -> None:
        self.hear: Hear = hear or (lambda _message: None)

    def listening(self) -> bool:
        """Start this process's listener if needed; True when no message can be missed."""
        return True

    def in_transaction(self, conn: Connection, message: str) -> None:
        """Called inside a transaction just before it commits, with what it tells the others."""

    def after_commit(self, message: str) -> None:
        """Called after that transaction committed, with the same message."""

    def close(self) -> None:
        """Stop listening (tests and shutdown)."""
