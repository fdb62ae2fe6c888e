"""Raw connections to a server on 127.0.0.1: answers read back from a socket, a server served
from a thread, and what the kernel knows of which requests a server has read (so a test waits
for that, not for a margin of time)."""

from __future__ import annotations

import contextlib
import os
import socket
import socketserver
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TypeVar

SocketServerT = TypeVar("SocketServerT", bound=socketserver.BaseServer)


@contextlib.contextmanager
def serving(server: SocketServerT) -> Iterator[SocketServerT]:
    """Serve ``server`` from a thread until the block ends, then close it."""
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def read_answer(sock: socket.socket, timeout: float) -> tuple[int, dict[str, str], bytes] | None:
    """The status, headers and body of the response arriving on ``sock`` within ``timeout``
    seconds; None when the server closed the connection without answering."""
    sock.settimeout(timeout)
    received = b""
    while b"\r\n\r\n" not in received:
        chunk = sock.recv(4096)
        if not chunk:
            return None
        received += chunk
    head, body = received.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    fields = (line.split(":", 1) for line in lines[1:])
    headers = {name.strip().lower(): value.strip() for name, value in fields}
    while len(body) < int(headers.get("content-length", 0)):
        chunk = sock.recv(4096)
        if not chunk:
            return None
        body += chunk
    return int(lines[0].split()[1]), headers, body


def wait_until_read(sockets: list[socket.socket], timeout: float) -> None:
    """Wait (at most ``timeout`` seconds) until the server has accepted the connection of each
    of ``sockets`` and read what was sent on it: its end of the connection belongs to a
    process (an inode in ``/proc/net/tcp``) and has nothing left to read. The requests are in
    the server's hands then, whatever happens to its listening socket after."""
    ends = {(s.getpeername()[1], s.getsockname()[1]) for s in sockets}
    deadline = time.monotonic() + timeout
    while (pending := ends - _read_ends()) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not pending, f"the server did not read {len(pending)} of {len(ends)} requests"


def wait_until_read_from(pid: int, port: int, timeout: float) -> None:
    """Wait (at most ``timeout`` seconds) until process ``pid`` has connections to
    127.0.0.1:``port`` and the server has read what came on them (as ``wait_until_read``): a
    worker's first request, its claim, is in the server's hands."""
    deadline = time.monotonic() + timeout
    while True:
        inodes = set()
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            with contextlib.suppress(OSError):  # closed meanwhile
                inodes.add(os.readlink(fd).removeprefix("socket:[").removesuffix("]"))
        rows = _tcp()
        ends = {
            (port, local) for local, remote, _, inode in rows if inode in inodes and remote == port
        }
        if ends and ends <= _read_ends(rows):
            return
        assert time.monotonic() < deadline, f"process {pid} sent nothing port {port} read"
        time.sleep(0.01)


def _read_ends(rows: list[tuple[int, int, int, str]] | None = None) -> set[tuple[int, int]]:
    """(local port, remote port) of the connection ends that a process holds and has read
    everything of."""
    return {
        (local, remote)
        for local, remote, unread, inode in rows or _tcp()
        if inode != "0" and not unread
    }


def _tcp() -> list[tuple[int, int, int, str]]:
    """The IPv4 TCP connection ends of this machine: local port, remote port, bytes received
    and not yet read, socket inode ("0" when no process holds it yet)."""
    rows = []
    for row in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = row.split()
        local, remote, queues, inode = fields[1], fields[2], fields[4], fields[9]
        port = (int(local.split(":")[1], 16), int(remote.split(":")[1], 16))
        rows.append((*port, int(queues.split(":")[1], 16), inode))
    return rows
