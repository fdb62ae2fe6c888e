"""Every setting queuelog reads, with its default and why it has that value.

Precedence (lowest first): these defaults, ``instance/config.toml``, ``FLASK_``-prefixed
environment variables (values parsed as JSON), then the mapping passed to ``create_app``.
"""

from __future__ import annotations

import math
import os
import secrets
import tempfile
import tomllib
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

from flask import Flask

from app.infra.secretbox import SecretBox
from app.queue.rules.retention import Retention
from app.queue.rules.type_limits import FLOW_KEYS, config_limits
from app.storage import databases
from app.storage.databases import payload_indexes

DEFAULTS: dict[str, Any] = {
    # Signs session cookies and CSRF tokens. Production refuses to start without a strong one.
    "SECRET_KEY": None,
    # Encrypts secrets at rest (TOTP secrets): comma-separated Fernet keys, the first encrypts,
    # all decrypt (rotation). None: development generates instance/secrets_key; production
    # then has none, and turning on the second factor is refused, naming this setting.
    "SECRETS_KEY": None,
    # SQLAlchemy URL; None means a SQLite file in the instance folder.
    "DATABASE_URL": None,
    # True for the gunicorn entry point: no generated secret key, refuse weak ones.
    "PRODUCTION": False,
    # Job types producers may enqueue (exact match). Anything else is refused with 422.
    "JOB_TYPES": ["email.send", "report.build", "webhook.deliver"],
    # Per-type settings: {"report.build": {"lease_seconds": 900, "backoff_base_seconds": 30,
    # "backoff_cap_seconds": 7200, "max_running": 4, "rate_limit": "100/minute", "paused": false}}.
    # max_running, rate_limit and paused are defaults that admins override at runtime
    # (PATCH /types/{type}, /ui/types).
    "JOB_TYPE_SETTINGS": {},
    # How long a claim holds a job before it is recovered as a failed attempt.
    "LEASE_SECONDS": 300,
    # Upper bound for a per-claim or per-type lease.
    "MAX_LEASE_SECONDS": 86_400,
    # Exponential backoff with full jitter: uniform(0, min(cap, base * 2**(retry - 1))),
    # where retry 1 is the first retry.
    "BACKOFF_BASE_SECONDS": 10,
    "BACKOFF_CAP_SECONDS": 3_600,
    # How many expired leases one claim recovers on its way (the reaper takes the rest).
    "RECOVER_BATCH": 100,
    # Most items in one batch request (POST /jobs/batch, /jobs/finish, /jobs/heartbeat): one
    # transaction each, so this bounds how long a batch holds the write lock.
    "MAX_BATCH": 1_000,
    # Most children one job may spawn in all (POST /jobs/{id}/children), whichever attempts
    # and workers made them: a held job cannot flood its producer's queue.
    "MAX_CHILDREN_PER_JOB": 1_000,
    # Size limits of the JSON API.
    "MAX_PAYLOAD_BYTES": 65_536,
    "MAX_CONTENT_LENGTH": 1_048_576,
    "MAX_JSON_DEPTH": 32,
    # Sanitized error texts are capped at this many bytes (after redaction).
    "MAX_ERROR_BYTES": 4_096,
    # Top-level payload keys that payload searches (GET /jobs?payload=...) find through an
    # index: an expression index per key (each costs every write of a job one index entry),
    # made and dropped by `flask db upgrade` to match this list (run it after changing the
    # list). A search without a string or number for one of them reads every job the other
    # filters leave. Printable ASCII without quotes or backslashes, e.g. ["customer_id"].
    "PAYLOAD_SEARCH_KEYS": [],
    # Priority cap of a new producer when none is given.
    "DEFAULT_MAX_PRIORITY": "medium",
    # SQLite durability: FULL survives power loss; NORMAL (WAL) may lose the last commits on
    # power loss but never corrupts, and writes faster.
    "SQLITE_SYNCHRONOUS": "FULL",
    # How long a SQLite writer waits for the lock before the request answers 503.
    "SQLITE_BUSY_TIMEOUT_MS": 10_000,
    # Rows deleted per transaction by retention and `jobs prune`, so claims never wait long.
    "PRUNE_BATCH_SIZE": 500,
    # Seconds finished jobs are kept after they finish, per status, then deleted with their
    # events by the housekeeping ticks; null keeps forever. A partial object merges with the
    # defaults: {"completed": 1209600, "cancelled": 1209600, "failed": 2592000} (14, 14, 30 d).
    "RETENTION": {},
    # Seconds audit rows are kept (365 days); null keeps them forever.
    "AUDIT_RETENTION": 31_536_000,
    # Each server process's housekeeping runs a retention step (one batch) at most this often;
    # `flask jobs tick` prunes everything due.
    "RETENTION_TICK_SECONDS": 10,
    # Jobs a bulk operation (POST /jobs/bulk) changes per transaction: claims and finishes
    # get the write lock between batches.
    "BULK_BATCH_SIZE": 200,
    # Most jobs one bulk operation takes (8 bytes each in memory while it runs); a filter
    # that selects more is refused with 422 (narrow it, e.g. with created_before).
    "BULK_MAX_JOBS": 100_000,
    # Failed sign-ins per client address before 429 (limits syntax: "10 per minute").
    "LOGIN_RATE_LIMIT": "10 per minute",
    # Failed sign-ins per account name, from any address. Fixed windows: an attacker can keep
    # the real user out for at most one window, never longer.
    "LOGIN_ACCOUNT_RATE_LIMIT": "20 per 10 minutes",
    # Where the sign-in counters live: "database" keeps them in DATABASE_URL, so the limits
    # hold across gunicorn workers and app servers; a limits URI (redis://...) works too.
    "LOGIN_THROTTLE_STORAGE_URI": "database",
    # Requests per API token (Flask-Limiter syntax, e.g. "100 per second"); None: no limit.
    "API_RATE_LIMIT": None,
    # Where the API counters live: memory:// counts per process (a limit of N allows up to
    # N x processes), redis://host shares them; never the database (no write per request).
    "RATELIMIT_STORAGE_URI": "memory://",
    "RATELIMIT_HEADERS_ENABLED": True,
    # A CSRF token lives as long as the session; the session is bounded instead.
    "WTF_CSRF_TIME_LIMIT": None,
    "PERMANENT_SESSION_LIFETIME": timedelta(hours=8),
    # A login lasts PERMANENT_SESSION_LIFETIME from the password check, however active (checked
    # on every request); the cookie is not re-sent on every response.
    "SESSION_REFRESH_EACH_REQUEST": False,
    "SESSION_COOKIE_HTTPONLY": True,
    "SESSION_COOKIE_SAMESITE": "Lax",
    # Always mark the session cookie Secure (it is Secure anyway on HTTPS requests).
    "SESSION_COOKIE_SECURE": False,
    # Reverse proxies in front of the app whose X-Forwarded-* headers are trusted.
    "TRUSTED_PROXIES": 0,
    # Admins must turn on the second factor (TOTP) before they may use the admin pages.
    "REQUIRE_TOTP_FOR_ADMINS": False,
    # Role changes need a login younger than this.
    "FRESH_LOGIN_SECONDS": 600,
    # Seconds between refreshes of live pages.
    "UI_POLL_SECONDS": 2,
    # Each server process's housekeeping thread ticks this often: due schedules fire and
    # attempts past their deadlines time out (`flask jobs tick` does it on demand).
    "SCHEDULE_TICK_SECONDS": 1,
    # Whether each server process keeps house in a thread of its own, started by its first
    # request; false leaves housekeeping to `flask jobs tick` (from cron or a timer).
    "HOUSEKEEPING_THREAD": True,
    # A schedule slot older than this when ticked was missed (the service was down): its
    # catch_up policy decides ("skip" drops missed slots, "one" enqueues one job for them).
    "SCHEDULE_GRACE_SECONDS": 300,
    # The explainer says no worker polls for a type when none asked for it (claimed, found or
    # not) for this long; each process notes a type's polls once per tenth of it.
    "EXPLAIN_IDLE_WORKER_SECONDS": 300,
    # Long-polls (claims with wait_seconds, and later waits) one API token may have waiting at
    # once in one server process; one more answers at once (204 for a claim) with Retry-After.
    "LONG_POLL_PER_TOKEN": 8,
    # Request handlers (threads) per server process. The server reads the same number from
    # QUEUELOG_THREADS, which also sets this default; at most half of them wait in long-polls.
    "SERVER_THREADS": 32,
    # argon2id parameters of new password hashes (app/accounts/passwords.py): RFC_9106_LOW_MEMORY
    # or RFC_9106_HIGH_MEMORY; CHEAPEST only with TESTING.
    "PASSWORD_HASH_PROFILE": "RFC_9106_LOW_MEMORY",
}

SECRET_KEY_FILE = "secret_key"  # noqa: S105 (a file name)
SECRETS_KEY_FILE = "secrets_key"
MIN_SECRET_KEY_LENGTH = 32
# A key's strength estimated from its own characters (length times the entropy of their
# frequencies): 40 x "a" has none, secrets.token_hex(16) about 116 bits, token_urlsafe(32) 200.
MIN_SECRET_KEY_BITS = 100


class ConfigError(RuntimeError):
    """The configuration cannot be used; the message says how to fix it."""


def load_config(app: Flask, overrides: dict[str, Any] | None) -> None:
    """Fill ``app.config`` from defaults, the instance TOML file, the environment and overrides."""
    app.config.from_mapping(DEFAULTS)
    app.config["SERVER_THREADS"] = _server_threads()
    toml_path = Path(app.instance_path) / "config.toml"
    if toml_path.is_file():
        with toml_path.open("rb") as fh:
            app.config.from_mapping(tomllib.load(fh))
    app.config.from_prefixed_env()
    if overrides:
        app.config.from_mapping(overrides)
    if isinstance(app.config["PERMANENT_SESSION_LIFETIME"], int | float):
        seconds = app.config["PERMANENT_SESSION_LIFETIME"]
        app.config["PERMANENT_SESSION_LIFETIME"] = timedelta(seconds=seconds)
    if not app.config["DATABASE_URL"]:
        app.config["DATABASE_URL"] = f"sqlite:///{Path(app.instance_path) / 'queuelog.sqlite3'}"
    app.config["SECRET_KEY"] = _secret_key(app)
    app.config["SECRETS_KEY"] = _secrets_key(app)
    _check_database(app.config["DATABASE_URL"])
    _check_limits(app.config)
    _check_password_profile(app.config)


def _check_database(url: str) -> None:
    try:
        databases.for_url(url)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def _check_password_profile(config: Any) -> None:
    """A known profile, and the cheap one only in tests: it would make stolen hashes cheap to
    crack."""
    from app.accounts.passwords import PROFILES, TEST_ONLY

    name = config["PASSWORD_HASH_PROFILE"]
    if name not in PROFILES:
        raise ConfigError(f"PASSWORD_HASH_PROFILE must be one of {', '.join(sorted(PROFILES))}")
    if name in TEST_ONLY and not config.get("TESTING"):
        raise ConfigError(f"PASSWORD_HASH_PROFILE {name} is for tests only (TESTING)")


POSITIVE_SETTINGS = (
    "LEASE_SECONDS",
    "MAX_LEASE_SECONDS",
    "MAX_PAYLOAD_BYTES",
    "MAX_JSON_DEPTH",
    "MAX_ERROR_BYTES",
    "RECOVER_BATCH",
    "PRUNE_BATCH_SIZE",
    "RETENTION_TICK_SECONDS",
    "SCHEDULE_TICK_SECONDS",
    "SCHEDULE_GRACE_SECONDS",
    "EXPLAIN_IDLE_WORKER_SECONDS",
    "MAX_BATCH",
    "MAX_CHILDREN_PER_JOB",
    "BULK_BATCH_SIZE",
    "BULK_MAX_JOBS",
    "LONG_POLL_PER_TOKEN",
    "SERVER_THREADS",
)


def _server_threads() -> int:
    """The handlers per process the server was told to start (QUEUELOG_THREADS), so the app
    bounds its long-polls by the number the server really has."""
    raw = os.environ.get("QUEUELOG_THREADS")
    if raw is None:
        return int(DEFAULTS["SERVER_THREADS"])
    if not raw.isdigit() or int(raw) < 1:
        raise ConfigError(f"QUEUELOG_THREADS must be a positive integer, not {raw!r}")
    return int(raw)


def _check_limits(config: Any) -> None:
    """Refuse numbers that would hang the maintenance loops or break the lease rules."""
    for name in POSITIVE_SETTINGS:
        value = config[name]
        if type(value) is not int or value < 1:
            raise ConfigError(f"{name} must be a positive integer, not {value!r}")
    leases = {"LEASE_SECONDS": config["LEASE_SECONDS"]}
    for job_type, settings in _type_settings(config.get("JOB_TYPE_SETTINGS") or {}).items():
        if "lease_seconds" in settings:
            leases[f"JOB_TYPE_SETTINGS[{job_type!r}].lease_seconds"] = settings["lease_seconds"]
    for name, value in leases.items():
        if type(value) is not int or not 1 <= value <= config["MAX_LEASE_SECONDS"]:
            raise ConfigError(f"{name} must be an integer from 1 to MAX_LEASE_SECONDS")
    try:
        Retention.from_config(config.get("RETENTION"), config.get("AUDIT_RETENTION"))
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    _check_payload_keys(config["PAYLOAD_SEARCH_KEYS"])


def _check_payload_keys(keys: Any) -> None:
    """A list of keys an index can name (a JSON path quotes them; SQL holds the path)."""
    if not isinstance(keys, list) or not all(
        isinstance(key, str) and payload_indexes.path_safe(key) for key in keys
    ):
        raise ConfigError(
            "PAYLOAD_SEARCH_KEYS must be a list of top-level payload keys of 1-"
            f"{payload_indexes.MAX_KEY_LENGTH} printable ASCII characters without quotes or "
            'backslashes, e.g. ["customer_id"]'
        )


TYPE_SETTING_KEYS = ("lease_seconds", "backoff_base_seconds", "backoff_cap_seconds", *FLOW_KEYS)


def _type_settings(value: Any) -> dict[str, Any]:
    """``JOB_TYPE_SETTINGS`` checked: an object of objects with known keys and valid flow
    limits (the lease is checked by the caller against MAX_LEASE_SECONDS)."""
    example = '{"report.build": {"max_running": 4, "rate_limit": "100/minute"}}'
    if not isinstance(value, dict):
        raise ConfigError(f"JOB_TYPE_SETTINGS must be an object of job types, e.g. {example}")
    for job_type, settings in value.items():
        where = f"JOB_TYPE_SETTINGS[{job_type!r}]"
        if not isinstance(settings, dict):
            raise ConfigError(f"{where} must be an object of settings, e.g. {example}")
        unknown = sorted(set(settings) - set(TYPE_SETTING_KEYS))
        if unknown:
            raise ConfigError(
                f"{where} has unknown setting(s) {', '.join(unknown)}; "
                f"the known ones are {', '.join(TYPE_SETTING_KEYS)}"
            )
        try:
            config_limits(settings)
        except ValueError as exc:
            raise ConfigError(f"{where}.{exc}") from None
    return value


def _secret_key(app: Flask) -> str:
    """Return a strong secret key, generating one for development runs only."""
    key = app.config.get("SECRET_KEY")
    if not key and not app.config["PRODUCTION"]:
        # Development only: every host would make its own key, so production must be given one.
        key_file = Path(app.instance_path) / SECRET_KEY_FILE
        key = key_file.read_text().strip() if key_file.is_file() else _create_key_file(key_file)
    if not key:
        raise ConfigError(
            "No SECRET_KEY: set FLASK_SECRET_KEY (e.g. python -c 'import secrets; "
            "print(secrets.token_urlsafe(48))') or put SECRET_KEY in instance/config.toml; "
            "production (gunicorn wsgi:app) never uses the generated development key."
        )
    if not app.config.get("TESTING"):
        _check_key_strength(str(key))
    return str(key)


def _check_key_strength(key: str) -> None:
    """Refuse a short key, and a long one made of few characters (``"a" * 40`` passes a length
    check yet anyone can guess it, and with it forge sessions)."""
    how = "python -c 'import secrets; print(secrets.token_urlsafe(48))'"
    if len(key) < MIN_SECRET_KEY_LENGTH:
        raise ConfigError(
            f"SECRET_KEY is too short: use at least {MIN_SECRET_KEY_LENGTH} characters ({how})."
        )
    counts = Counter(key).values()
    bits = -sum(n * math.log2(n / len(key)) for n in counts)
    if bits < MIN_SECRET_KEY_BITS:
        raise ConfigError(
            f"SECRET_KEY is too predictable (about {bits:.0f} bits from repeated characters, "
            f"at least {MIN_SECRET_KEY_BITS} needed): use a random key ({how})."
        )


def _secrets_key(app: Flask) -> str | None:
    """``SECRETS_KEY`` checked (a malformed key stops the start, naming the setting); for
    development runs without one, the instance folder's generated key."""
    key = app.config.get("SECRETS_KEY")
    if not key and not app.config["PRODUCTION"]:
        from cryptography.fernet import Fernet  # only where a key is used (see app.infra.secretbox)

        key_file = Path(app.instance_path) / SECRETS_KEY_FILE
        key = (
            key_file.read_text().strip()
            if key_file.is_file()
            else _create_key_file(key_file, Fernet.generate_key().decode())
        )
    if not key:
        return None
    if not isinstance(key, str):
        raise ConfigError("SECRETS_KEY must be a string of comma-separated Fernet keys")
    try:
        SecretBox.from_setting(key)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    return key


def _create_key_file(key_file: Path, key: str | None = None) -> str:
    """Create the instance key file once (with ``key``, else a random secret key); concurrent
    processes all read the winner's key."""
    key_file.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=key_file.parent, prefix=".secret-")
    try:
        os.write(fd, (key or secrets.token_urlsafe(48)).encode())
        os.close(fd)
        os.link(tmp, key_file)  # atomic: the first process wins, the others read its key
    except FileExistsError:
        pass
    finally:
        os.unlink(tmp)
    return key_file.read_text().strip()
