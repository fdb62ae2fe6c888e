"""Password-guess throttling per client address and per account, counted before the password
is checked: signing in, its second step, and the current password of a password change all
draw on the same two counters, so a stolen session guesses no faster than a stranger.

Each attempt increments its counters first (one atomic statement per counter) and is refused
unchecked when a counter is over its limit, so concurrent guesses cannot slip past the limit.
A correct sign-in gives its attempts back: only failures use the limits up. Windows are fixed
and end on time however often they are hit, so the per-account limit can keep the real user
out for at most one window.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import cast

from flask import Flask, current_app, request
from limits import RateLimitItem, parse
from limits.storage import Storage, storage_from_string
from werkzeug.exceptions import TooManyRequests

from app.infra import db
from app.infra.ratelimit import DatabaseStorage

EXTENSION_KEY = "queuelog.login_throttle"


@dataclass(frozen=True)
class LoginThrottle:
    """The counters' storage and the two limits."""

    storage: Storage
    per_address: RateLimitItem
    per_account: RateLimitItem

    def _keys(self, address: str, name: str) -> list[tuple[str, RateLimitItem]]:
        # Any name counts, existing or not, so a refusal says nothing about who exists.
        return [
            (f"login:address:{address}", self.per_address),
            (f"login:account:{name.lower()[:64]}", self.per_account),
        ]

    def attempt(self, address: str, name: str) -> int | None:
        """Count an attempt; None lets it go on to the password check, else the seconds until
        the window that refused it ends."""
        for key, limit in self._keys(address, name):
            if self.storage.incr(key, limit.get_expiry()) > limit.amount:
                return max(1, int(self.storage.get_expiry(key) - time.time()) + 1)
        return None

    def succeeded(self, address: str, name: str) -> None:
        """A correct sign-in gives its attempt back to both counters (not to a window that has
        ended since: that would start the next one below zero)."""
        for key, limit in self._keys(address, name):
            if self.storage.get(key) > 0:
                self.storage.incr(key, limit.get_expiry(), amount=-1)


def init_app(app: Flask) -> None:
    """Build the throttle from LOGIN_RATE_LIMIT, LOGIN_ACCOUNT_RATE_LIMIT and
    LOGIN_THROTTLE_STORAGE_URI ("database": the app's own database, shared by every process)."""
    uri = app.config["LOGIN_THROTTLE_STORAGE_URI"]
    storage: Storage = (
        DatabaseStorage(engine=db.engine(app))
        if uri == "database"
        else cast(Storage, storage_from_string(uri))  # a synchronous URI, never async+...
    )
    app.extensions[EXTENSION_KEY] = LoginThrottle(
        storage,
        parse(app.config["LOGIN_RATE_LIMIT"]),
        parse(app.config["LOGIN_ACCOUNT_RATE_LIMIT"]),
    )


def login_throttle() -> LoginThrottle:
    """The current app's sign-in throttle."""
    return current_app.extensions[EXTENSION_KEY]  # type: ignore[no-any-return]


def client_address() -> str:
    """The address the per-address counter counts (after ProxyFix when TRUSTED_PROXIES)."""
    return request.remote_addr or ""


def refusal(retry_after: int) -> TooManyRequests:
    """The 429 for an attempt over a limit, with Retry-After set to the window's end."""
    refused = TooManyRequests("Too many attempts; try again later.")
    refused.retry_after = retry_after
    return refused
