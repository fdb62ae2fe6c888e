"""Wake-ups by datagrams: each listening process binds a unix datagram socket in a folder beside
the database file, and after a commit the writer sends one datagram to every other socket
there. No polling: an idle listener is blocked in the kernel."""

from __future__ import annotations

import atexit
import contextlib
import os
import secrets
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

from app.storage.wakeup import MAX_MESSAGE, Hear, Wakeup


class SocketWakeup(Wakeup):
    """One unix datagram socket per listening process in ``folder``."""

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

    def after_commit(self, message: str) -> None:
        own = self._name if self._pid == os.getpid() else ""
        try:
            listeners = [name for name in os.listdir(self.folder) if name != own]
        except FileNotFoundError:
            return  # no process has listened on this database yet
        if not listeners:
            return  # the common case: no other process listens, nothing to open
        with self._opened() as fd, socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sender:
            sender.setblocking(False)
            for name in listeners:
                path = f"/proc/self/fd/{fd}/{name}"
                try:
                    sender.sendto(message.encode("ascii", "replace") or b"!", path)
                except BlockingIOError:
                    pass  # its queue is full of messages it has not read yet: it is awake anyway
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
