"""Long-poll admission: how many requests of one process may wait at once, per token and in all.

A waiting request (a claim with ``wait_seconds``, or any later route that waits) holds one of
the server's request handlers while it sleeps. Without a bound, one token could open as many
waits as the process has handlers and leave nothing for enqueues, pages or health checks. The
counts are per process, like the handlers they protect: with P processes a token waits in at
most P x ``LONG_POLL_PER_TOKEN`` requests. A request beyond either bound does not queue: it
answers at once (a claim with 204) and ``Retry-After`` says when to ask again.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from flask import Flask, current_app

EXTENSION_KEY = "queuelog.admission"
# Seconds a refused waiter is told to pause: long enough to leave the handlers to others, short
# enough that a worker with a free slot soon after is not idle for long.
RETRY_AFTER = "1"


class Admission:
    """Counts the waiting requests of this process, per key (a token) and in all."""

    def __init__(self, per_key: int, total: int) -> None:
        self.per_key = per_key
        self.total = total
        self._lock = threading.Lock()
        self._waiting: dict[str, int] = {}
        self._all = 0

    @contextlib.contextmanager
    def waiting(self, key: str) -> Iterator[bool]:
        """Yield True and count the caller as waiting until the block ends, or yield False
        (nothing counted) when ``key`` or the process is at its bound."""
        with self._lock:
            held = self._waiting.get(key, 0)
            admitted = held < self.per_key and self._all < self.total
            if admitted:
                self._waiting[key] = held + 1
                self._all += 1
        try:
            yield admitted
        finally:
            if admitted:
                self._release(key)

    def _release(self, key: str) -> None:
        with self._lock:
            self._all -= 1
            left = self._waiting[key] - 1
            if left:
                self._waiting[key] = left
            else:
                del self._waiting[key]  # the map holds only tokens that wait now

    def counts(self) -> tuple[int, int]:
        """(tokens waiting, requests waiting) in this process right now."""
        with self._lock:
            return len(self._waiting), self._all


def init_app(app: Flask) -> None:
    """Bound waits by ``LONG_POLL_PER_TOKEN`` and half of ``SERVER_THREADS`` (the handlers per
    process the server was started with), so the other half always serves everything else."""
    total = max(1, int(app.config["SERVER_THREADS"]) // 2)
    app.extensions[EXTENSION_KEY] = Admission(int(app.config["LONG_POLL_PER_TOKEN"]), total)


def admission() -> Admission:
    """This app's admission counter."""
    return current_app.extensions[EXTENSION_KEY]  # type: ignore[no-any-return]
