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


def body_of(message: str) -> str:
    """The body of a message, whoever sent it."""
    return message.partition(_SEPARATOR)[2]


class Wakeup:
    """In-process only: there is no other process to tell. ``hear`` receives each message
    another process sends (with its sender: ``received`` reads it)."""

    def __init__(self, hear: Hear | None = None) -> None:
        self.hear: Hear = hear or (lambda _message: None)
        self._sender = (0, "")

    @property
    def name(self) -> str:
        """Who sends this one's messages: its process and a random part, anew after a fork (an
        app server on the same database, even in the same process, has its own)."""
        if self._sender[0] != os.getpid():
            self._sender = (os.getpid(), f"{os.getpid()}.{secrets.token_hex(4)}")
        return self._sender[1]

    def addressed(self, body: str) -> str:
        """``body`` as this one sends it ("" when too long: it then means "anything")."""
        message = f"{self.name}{_SEPARATOR}{body}"
        return message if len(message) <= MAX_MESSAGE else f"{self.name}{_SEPARATOR}"

    def received(self, message: str) -> str | None:
        """The body of a message another sent (None for this one's own)."""
        sender, separator, body = message.partition(_SEPARATOR)
        if not separator:
            return ""  # a bare ring (a listener that reconnected says "anything may have happened")
        return None if sender == self.name else body

    def listening(self) -> bool:
        """Start this process's listener if needed; True when no message can be missed."""
        return True

    def in_transaction(self, conn: Connection, message: str) -> None:
        """Called inside a transaction just before it commits, with what it tells the others."""

    def after_commit(self, message: str) -> None:
        """Called after that transaction committed, with the same message."""

    def close(self) -> None:
        """Stop listening (tests and shutdown)."""
