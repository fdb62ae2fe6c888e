"""Wake-ups by ``NOTIFY``: the writing transaction notifies a channel (delivered only if it
commits), and each process keeps one ``LISTEN`` connection that hears the others, reconnecting
after failures; while it is down, the process's waiters look again now and then."""

from __future__ import annotations

import os
import threading

import psycopg
from sqlalchemy import Connection

from app.storage.wakeup import Hear, Wakeup

_RECONNECT_DELAYS = (0.05, 0.2, 0.5, 1.0, 2.0)


class NotifyWakeup(Wakeup):
    """NOTIFY in the writing transaction, one LISTEN connection per process."""

    def __init__(self, conninfo: str, channel: str, hear: Hear | None = None) -> None:
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

    def in_transaction(self, conn: Connection, message: str) -> None:
        # Delivered to every listener once the transaction commits, this process's own too
        # (which ``received`` tells apart); nothing is sent if it rolls back.
        conn.exec_driver_sql("SELECT pg_notify(%(c)s, %(m)s)", {"c": self.channel, "m": message})

    def close(self) -> None:
        self._stop.set()
