"""Password hashing: argon2id with the parameter profile ``PASSWORD_HASH_PROFILE`` names.

The default is RFC 9106's low-memory profile (64 MiB, three passes: about 0.17 s a hash here).
``CHEAPEST`` exists for test suites, where every user and sign-in would pay that; the
configuration refuses it outside ``TESTING``. A hash records its own parameters, so checking a
password works whatever profile made it; the profile only decides how new hashes are made.
"""

from __future__ import annotations

from functools import cache

from argon2 import PasswordHasher, profiles
from flask import Flask

PROFILES = {
    "RFC_9106_LOW_MEMORY": profiles.RFC_9106_LOW_MEMORY,
    "RFC_9106_HIGH_MEMORY": profiles.RFC_9106_HIGH_MEMORY,
    "CHEAPEST": profiles.CHEAPEST,
}
TEST_ONLY = frozenset({"CHEAPEST"})
_profile = {"name": "RFC_9106_LOW_MEMORY"}  # the process's; set by ``init_app``


def init_app(app: Flask) -> None:
    """New hashes use the app's profile (one app serves a process; the test apps agree)."""
    _profile["name"] = app.config["PASSWORD_HASH_PROFILE"]


@cache
def _hasher(profile: str) -> PasswordHasher:
    return PasswordHasher.from_parameters(PROFILES[profile])


def hasher() -> PasswordHasher:
    """The hasher of the configured profile."""
    return _hasher(_profile["name"])


@cache
def _dummy(profile: str) -> str:
    return _hasher(profile).hash("no such user: the check costs what a real one does")


def dummy_hash() -> str:
    """A hash to verify against when the user does not exist, so timing reveals nothing."""
    return _dummy(_profile["name"])
