"""PostgreSQL: a pool whose connections are checked before use (a server restart or a failover
closes them), writers that run at once (the claim relies on ``FOR UPDATE SKIP LOCKED`` under
the default READ COMMITTED isolation), and wake-ups by ``NOTIFY``
(``app.storage.databases.notify``), which reach every app server on the database."""

from __future__ import annotations

from sqlalchemy import Engine, create_engine
from sqlalchemy.engine import make_url

from app.storage.databases import Database
from app.storage.databases.notify import NotifyWakeup
from app.storage.wakeup import Hear, Wakeup


class PostgreSQLDatabase(Database):
    writers_take_turns = False

    def make_engine(self, *, synchronous: str, busy_timeout_ms: int) -> Engine:
        # Durability and lock waits are the server's settings (synchronous_commit,
        # lock_timeout), not a connection's: the arguments are SQLite's alone.
        return create_engine(self.url, pool_pre_ping=True, future=True)

    def wakeup(self, topic: str, hear: Hear | None = None) -> Wakeup:
        conninfo = (
            make_url(self.url).set(drivername="postgresql").render_as_string(hide_password=False)
        )
        return NotifyWakeup(conninfo, f"queuelog_{topic}", hear)
