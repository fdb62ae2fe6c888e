"""Configuration: production needs a real secret key; numbers that would break the queue are
refused at start-up with a message that says which setting is wrong."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cryptography.fernet import Fernet

from app import create_app
from app.config import ConfigError
from app.infra.secretbox import SecretBox
from tests.conftest import TEST_SECRET, TEST_SECRETS_KEY


def _app(tmp_path: Path, **config: Any) -> Any:
    """An app whose instance folder is this test's own."""
    return create_app(
        {
            "INSTANCE_PATH": str(tmp_path / "instance"),
            "DATABASE_URL": f"sqlite:///{tmp_path / 'q.sqlite3'}",
            **config,
        }
    )


def test_development_generates_and_keeps_a_key(tmp_path: Path) -> None:
    first = _app(tmp_path)
    second = _app(tmp_path)
    key_file = tmp_path / "instance" / "secret_key"
    assert Path(first.instance_path) == key_file.parent
    assert key_file.is_file()
    assert first.config["SECRET_KEY"] == second.config["SECRET_KEY"] == key_file.read_text()


def test_production_refuses_to_start_without_a_key_even_if_development_made_one(
    tmp_path: Path,
) -> None:
    _app(tmp_path)  # a development run (or any flask command) leaves instance/secret_key
    with pytest.raises(ConfigError, match="SECRET_KEY"):
        _app(tmp_path, PRODUCTION=True)


def test_production_refuses_a_weak_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="too short"):
        _app(tmp_path, PRODUCTION=True, SECRET_KEY="short")


@pytest.mark.parametrize("key", ["a" * 40, "ab" * 32, "abcd" * 10, "test-secret-key-" + "x" * 40])
def test_production_refuses_a_long_but_predictable_key(tmp_path: Path, key: str) -> None:
    with pytest.raises(ConfigError, match="SECRET_KEY is too predictable"):
        _app(tmp_path, PRODUCTION=True, SECRET_KEY=key)


def test_production_starts_with_a_strong_key(tmp_path: Path) -> None:
    app = _app(tmp_path, PRODUCTION=True, SECRET_KEY=TEST_SECRET)
    assert app.config["SECRET_KEY"] == TEST_SECRET


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("RECOVER_BATCH", 0),
        ("PRUNE_BATCH_SIZE", 0),
        ("LEASE_SECONDS", -1),
        ("MAX_JSON_DEPTH", "32"),
        ("LEASE_SECONDS", 10**6),
        ("JOB_TYPE_SETTINGS", {"report.build": {"lease_seconds": 10**6}}),
        ("LONG_POLL_PER_TOKEN", 0),
        ("MAX_CHILDREN_PER_JOB", 0),
        ("SERVER_THREADS", 0),
    ],
)
def test_settings_that_would_break_the_queue_are_refused(
    tmp_path: Path, setting: str, value: Any
) -> None:
    with pytest.raises(ConfigError):
        _app(tmp_path, SECRET_KEY=TEST_SECRET, **{setting: value})


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"max_running": 0}, r"\['report.build'\]\.max_running must be an integer from 1"),
        ({"max_running": "4"}, r"max_running must be an integer"),
        ({"rate_limit": "10 per minute"}, r'rate_limit must be "N/second", "N/minute" or "N/hour"'),
        ({"rate_limit": "0/second"}, r"rate_limit must be"),
        ({"paused": "yes"}, r"paused must be true or false"),
        ({"partition_max_running": 0}, r"\.partition_max_running must be an integer from 1"),
        ({"partition_max_running": 10**7}, r"partition_max_running must be an integer"),
        ({"partition_max_running": True}, r"partition_max_running must be an integer"),
        ({"partition_rate_limit": "5/day"}, r'\.partition_rate_limit must be "N/second"'),
        ({"partition_rate_limit": 5}, r"partition_rate_limit must be"),
        ({"max_runing": 4}, r"unknown setting\(s\) max_runing; the known ones are lease_seconds"),
        ("fast", r"JOB_TYPE_SETTINGS\['report.build'\] must be an object of settings"),
    ],
)
def test_flow_settings_are_checked_with_a_message_that_says_how_to_fix_them(
    tmp_path: Path, settings: Any, message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        _app(tmp_path, SECRET_KEY=TEST_SECRET, JOB_TYPE_SETTINGS={"report.build": settings})


def test_flow_settings_become_the_types_defaults(tmp_path: Path) -> None:
    from app.infra.queue_settings import EXTENSION_KEY

    flow = {"max_running": 4, "rate_limit": "100/minute", "paused": True}
    app = _app(tmp_path, SECRET_KEY=TEST_SECRET, JOB_TYPE_SETTINGS={"report.build": flow})
    limits = app.extensions[EXTENSION_KEY].flow["report.build"]
    assert (limits.max_running, str(limits.rate_limit), limits.paused) == (4, "100/minute", True)


def test_partition_limits_alone_make_a_type_limited(tmp_path: Path) -> None:
    from app.infra.queue_settings import EXTENSION_KEY

    flow = {"partition_max_running": 2, "partition_rate_limit": "10/minute"}
    app = _app(tmp_path, SECRET_KEY=TEST_SECRET, JOB_TYPE_SETTINGS={"report.build": flow})
    limits = app.extensions[EXTENSION_KEY].flow["report.build"]
    assert (limits.partition_max_running, str(limits.partition_rate_limit)) == (2, "10/minute")
    assert limits.limited and limits.partitioned and limits.max_running is None


def test_the_servers_thread_count_is_the_apps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """QUEUELOG_THREADS, which the server starts its handlers by, also bounds the long-polls."""
    monkeypatch.setenv("QUEUELOG_THREADS", "12")
    app = _app(tmp_path, SECRET_KEY=TEST_SECRET)
    assert app.config["SERVER_THREADS"] == 12
    assert app.extensions["queuelog.admission"].total == 6
    monkeypatch.setenv("QUEUELOG_THREADS", "twelve")
    with pytest.raises(ConfigError, match="QUEUELOG_THREADS must be a positive integer"):
        _app(tmp_path, SECRET_KEY=TEST_SECRET)


@pytest.mark.parametrize(
    "value", ["not a key", "zF6ucAaOK_BwvsG35SO9BR6SCT4G4xRdDRqA3vxor70=,", "c2hvcnQ=", 42]
)
def test_a_malformed_secrets_key_stops_the_start_naming_it(tmp_path: Path, value: Any) -> None:
    with pytest.raises(ConfigError, match="SECRETS_KEY") as refused:
        _app(tmp_path, SECRET_KEY=TEST_SECRET, SECRETS_KEY=value)
    assert "not a key" not in str(refused.value)  # the message never echoes a key


def test_development_generates_a_secrets_key_and_production_has_none_unless_set(
    tmp_path: Path,
) -> None:
    first = _app(tmp_path)
    key_file = tmp_path / "instance" / "secrets_key"
    assert (
        first.config["SECRETS_KEY"] == key_file.read_text() == _app(tmp_path).config["SECRETS_KEY"]
    )
    SecretBox.from_setting(key_file.read_text())
    production = _app(tmp_path, PRODUCTION=True, SECRET_KEY=TEST_SECRET)
    assert production.config["SECRETS_KEY"] is None
    two_keys = f"{Fernet.generate_key().decode()},{TEST_SECRETS_KEY}"
    rotated = _app(tmp_path, PRODUCTION=True, SECRET_KEY=TEST_SECRET, SECRETS_KEY=two_keys)
    assert rotated.config["SECRETS_KEY"] == two_keys


def test_the_cheap_password_profile_is_for_tests_only(tmp_path: Path) -> None:
    key = {"SECRET_KEY": TEST_SECRET}
    with pytest.raises(ConfigError, match="PASSWORD_HASH_PROFILE CHEAPEST is for tests only"):
        _app(tmp_path, PASSWORD_HASH_PROFILE="CHEAPEST", **key)
    with pytest.raises(ConfigError, match="PASSWORD_HASH_PROFILE must be one of"):
        _app(tmp_path, PASSWORD_HASH_PROFILE="md5", TESTING=True, **key)
    assert _app(tmp_path, **key).config["PASSWORD_HASH_PROFILE"] == "RFC_9106_LOW_MEMORY"
    assert _app(tmp_path, PASSWORD_HASH_PROFILE="CHEAPEST", TESTING=True, **key)
