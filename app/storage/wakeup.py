"""Wake-ups across processes and app servers: a committed change tells the other processes on
the database what it did, so their waiting requests need not poll.

How processes reach each other is the database's own way (``app.storage.databases``: a
notification sent by the writing transaction, or a datagram to each listening process's socket
beside the database file); this module holds what every way shares and ``Wakeup``, the
in-process one they extend (a database no other process opens). A message names the process
that sent it, so a process never acts on its own: what its own commits did it learns directly
(``app.storage.transactions``).

A message that one listener can act on for all (jobs became due: one process's waiting claims
take them) may go ``to_one``: where the way can tell which processes have requests waiting
(``waiting``), it names one of them, and the others hear that another acts on it
(``addressee``); elsewhere it reaches everyone, as any other message.

Nothing here knows about Flask or about jobs: a message is text the topic's listener reads.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable
from enum import Enum

from sqlalchemy import Connection

# A notification's payload holds under 8,000 bytes; a longer message goes as "" ("anything").
MAX_MESSAGE = 7900
Hear = Callable[[str], None]
# While a listener is down, waiters look again this often so nothing due is missed for long.
FALLBACK_POLL_SECONDS = 0.5
_SEPARATOR = "|"
_TO_ONE = "*"  # after the sender's name: the message is for one waiting listener
_TO = ">"  # after the sender's name: the listener the message names
_NAME_ROOM = 64  # at most a listener's name, and the mark before it


class Addressee(Enum):
    """Whom a message heard is for."""

    EVERYONE = "everyone"
    THIS_ONE = "this one"  # named: it acts for all, and passes on what it cannot
    ANOTHER = "another"  # another listener was named: it acts for all


def for_one(message: str) -> bool:
    """Whether ``message`` went ``to_one`` and names no listener yet."""
    return message.partition(_SEPARATOR)[0].endswith(_TO_ONE)


def naming(message: str, listener: str) -> str:
    """A message ``to_one`` as sent to everyone, naming ``listener`` ("": none, everyone acts)."""
    sender, _, body = message.partition(_SEPARATOR)
    sender = sender.rstrip(_TO_ONE) + (f"{_TO}{listener}" if listener else "")
    return f"{sender}{_SEPARATOR}{body}"


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

    def addressed(self, body: str, to_one: bool = False) -> str:
        """``body`` as this one sends it ("" when too long: it then means "anything");
        ``to_one``: one waiting listener may act on it for all."""
        sender = f"{self.name}{_TO_ONE}" if to_one else self.name
        message = f"{sender}{_SEPARATOR}{body}"
        room = _NAME_ROOM if to_one else 0  # for the listener's name, once named
        return message if len(message) + room <= MAX_MESSAGE else f"{self.name}{_SEPARATOR}"

    def received(self, message: str) -> str | None:
        """The body of a message another sent (None for this one's own)."""
        sender, separator, body = message.partition(_SEPARATOR)
        if not separator:
            return ""  # a bare ring (a listener that reconnected says "anything may have happened")
        return None if sender.partition(_TO)[0].rstrip(_TO_ONE) == self.name else body

    def addressee(self, message: str) -> Addressee:
        """Whom a message this one heard is for."""
        sender = message.partition(_SEPARATOR)[0]
        if _TO not in sender:
            return Addressee.EVERYONE  # sent to all, or ``to_one`` where no one was named
        named = sender.partition(_TO)[2]
        return Addressee.THIS_ONE if named == self.listener else Addressee.ANOTHER

    @property
    def listener(self) -> str:
        """How the others name this one's listener when they address it ("": never)."""
        return ""

    def waiting(self, waiting: bool) -> None:
        """This process has requests waiting to be woken (or no longer has): where the way
        can tell the others, a message ``to_one`` is for one of the processes that have."""

    def listening(self) -> bool:
        """Start this process's listener if needed; True when no message can be missed."""
        return True

    def in_transaction(self, conn: Connection, message: str) -> None:
        """Called inside a transaction just before it commits, with what it tells the others."""

    def after_commit(self, message: str) -> bool:
        """Called after that transaction committed, with the same message; whether it named
        another listener to act on it for all."""
        return False

    def close(self) -> None:
        """Stop listening (tests and shutdown)."""
