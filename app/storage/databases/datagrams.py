"""Wake-ups by datagrams: each listening process binds a unix datagram socket in a folder beside
the database file, and after a commit the writer sends one datagram to every other socket
there. No polling: an idle listener is blocked in the kernel.

A process with requests waiting to be woken keeps a marker file beside its socket; a message
``to_one`` names one of the marked processes (at random), so the others know that one acts on
it. Markers and sockets left by a process that died are removed by the first sender they
refuse.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import random
import secrets
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

from app.storage.wakeup import MAX_MESSAGE, Hear, Wakeup, for_one, naming

_WAITING = ".waiting"  # the marker beside a listener's socket: it has requests waiting


class SocketWakeup(Wakeup):
    """One unix datagram socket per listening process in ``folder``."""

    def __init__(self, folder: Path, hear: Hear | None = None) -> None:
        super().__init__(hear)
        self.folder = folder
        self._lock = threading.Lock()
        self._pid = 0
        self._name = ""
        self._receiver: socket.socket | None = None
        self._marked = False  # this process's marker is in the folder

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
                self._receiver, self._pid, self._marked = receiver, os.getpid(), False
                threading.Thread(
                    target=self._listen, args=(receiver,), name="queuelog-wakeup", daemon=True
                ).start()
                atexit.register(self._unlink_own)
        return True

    def _listen(self, receiver: socket.socket) -> None:
        with receiver, contextlib.suppress(OSError):
            while data := receiver.recv(MAX_MESSAGE + 1):  # close() sends an empty datagram
                self.hear("" if data == b"!" else data.decode("ascii", "replace"))

    @property
    def listener(self) -> str:
        return self._name if self._pid == os.getpid() else ""

    def waiting(self, waiting: bool) -> None:
        with self._lock:
            if self._pid != os.getpid() or waiting == self._marked:
                return
            self._marked = waiting
            with self._opened() as fd:
                if waiting:
                    os.close(os.open(self._name + _WAITING, os.O_CREAT | os.O_WRONLY, dir_fd=fd))
                else:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(self._name + _WAITING, dir_fd=fd)

    def after_commit(self, message: str) -> bool:
        own = self.listener
        try:
            names = os.listdir(self.folder)
        except FileNotFoundError:
            return False  # no process has listened on this database yet
        listeners = [n for n in names if not n.endswith(_WAITING) and n != own]
        if not listeners:
            return False  # the common case: no other process listens, nothing to open
        named = False
        with self._opened() as fd, socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sender:
            sender.setblocking(False)
            if for_one(message):  # the first waiting listener that takes it is named
                marked = [n for n in listeners if n + _WAITING in names]
                random.shuffle(marked)
                for name in marked:
                    listeners.remove(name)
                    to_name = naming(message, name)
                    if self._send(sender, fd, name, to_name):
                        message, named = to_name, True
                        break
                else:
                    message = naming(message, "")  # no one waits: everyone acts on it
            for name in listeners:
                self._send(sender, fd, name, message)
        return named

    @staticmethod
    def _send(sender: socket.socket, fd: int, name: str, message: str) -> bool:
        """Send ``message`` to the listener ``name``; False if it is gone (its socket and
        marker are removed then)."""
        try:
            sender.sendto(message.encode("ascii", "replace") or b"!", f"/proc/self/fd/{fd}/{name}")
        except BlockingIOError:
            pass  # its queue is full of messages it has not read yet: it is awake anyway
        except (ConnectionRefusedError, FileNotFoundError):
            for path in (name, name + _WAITING):  # left behind by a process that died
                with contextlib.suppress(OSError):
                    os.unlink(path, dir_fd=fd)
            return False
        except OSError:
            pass  # e.g. another user's socket: a wake-up is a hint, the commit stands
        return True

    def _unlink_own(self) -> None:
        if self._pid == os.getpid():
            for path in (self._name, self._name + _WAITING):
                with contextlib.suppress(OSError):
                    os.unlink(self.folder / path)

    def close(self) -> None:
        with self._lock:
            if self._receiver is not None and self._pid == os.getpid():
                with self._opened() as fd, socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
                    s.sendto(b"", f"/proc/self/fd/{fd}/{self._name}")
                self._unlink_own()
            self._receiver, self._pid, self._marked = None, 0, False
