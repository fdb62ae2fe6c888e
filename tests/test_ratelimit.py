"""The database storage behind Flask-Limiter counts fixed windows on both engines."""

from __future__ import annotations

import time

from flask import Flask
from limits import RateLimitItemPerMinute
from limits.strategies import FixedWindowRateLimiter

from app.infra import db
from app.infra.ratelimit import DatabaseStorage
from tests.backends import every_backend  # noqa: F401 (the upsert differs per engine)


def test_counts_windows_and_forgets(app: Flask) -> None:
    storage = DatabaseStorage(engine=db.engine(app))
    assert storage.check()
    assert [storage.incr("a", 60) for _ in range(3)] == [1, 2, 3]
    assert storage.get("a") == 3
    assert storage.get("b") == 0
    assert time.time() < storage.get_expiry("a") <= time.time() + 60
    storage.clear("a")
    assert storage.get("a") == 0
    storage.incr("c", 60, amount=5)
    assert storage.reset() == 1
    assert storage.get("c") == 0


def test_an_ended_window_starts_again_at_one(app: Flask) -> None:
    storage = DatabaseStorage(engine=db.engine(app))
    storage.incr("k", 60)
    storage.incr("k", 60)
    with db.transaction(app) as conn:  # age the window as time would
        conn.exec_driver_sql("UPDATE rate_limits SET expires_at = expires_at - 120")
    assert storage.get("k") == 0
    assert storage.incr("k", 60) == 1


def test_the_limits_library_limits_with_it(app: Flask) -> None:
    limiter = FixedWindowRateLimiter(DatabaseStorage(engine=db.engine(app)))
    limit = RateLimitItemPerMinute(2)
    assert [limiter.hit(limit, "client") for _ in range(3)] == [True, True, False]
    assert limiter.test(limit, "other")
