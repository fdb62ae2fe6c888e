"""Every command of the README's "Command line" through Click's runner, and once through a
real ``flask`` process on a throwaway database."""

from __future__ import annotations

import os
import secrets
import subprocess
from datetime import timedelta
from pathlib import Path

import pytest
from flask import Flask
from flask.testing import FlaskCliRunner
from sqlalchemy import text

from app import create_app
from app.accounts import service as accounts
from app.infra import db
from app.infra.queue_settings import queue_settings
from app.queue.usecases import claiming, reports
from app.queue.vocabulary.timeutil import utcnow
from tests.builders import Api, make_api, make_token, make_user
from tests.conftest import base_config

ROOT = Path(__file__).resolve().parent.parent
FLASK = ROOT / ".venv" / "bin" / "flask"


def _users(app: Flask) -> dict[str, tuple[str, int, bool, str | None]]:
    with app.app_context(), db.read() as conn:
        rows = conn.execute(
            text("SELECT name, role, max_priority, disabled, password_hash FROM users")
        )
        return {r.name: (r.role, r.max_priority, bool(r.disabled), r.password_hash) for r in rows}


def test_db_upgrade(runner: FlaskCliRunner) -> None:
    result = runner.invoke(args=["db", "upgrade"])
    assert result.exit_code == 0, result.output
    assert "latest revision" in result.output
    assert runner.invoke(args=["db", "upgrade"]).exit_code == 0


def test_user_create(app: Flask, runner: FlaskCliRunner) -> None:
    result = runner.invoke(args=["user", "create", "alice", "--role", "producer"])
    assert result.exit_code == 0, result.output
    assert "alice" in result.output
    high = runner.invoke(
        args=["user", "create", "bob", "--role", "producer", "--max-priority", "high"]
    )
    assert high.exit_code == 0, high.output
    with_password = runner.invoke(
        args=["user", "create", "carol", "--role", "admin", "--password-stdin"],
        input="a long enough password\n",
    )
    assert with_password.exit_code == 0, with_password.output
    users = _users(app)
    assert users["alice"][:3] == ("producer", 10, False)
    assert users["alice"][3] is None  # token-only
    assert users["bob"][:2] == ("producer", 20)
    assert users["carol"][0] == "admin"
    assert str(users["carol"][3]).startswith("$argon2id$")
    with app.app_context(), db.read() as conn:
        assert accounts.authenticate_password(conn, "carol", "a long enough password")


@pytest.mark.parametrize(
    ("args", "stdin"),
    [
        (["user", "create", "dup", "--role", "worker"], None),  # exists already
        (["user", "create", "x", "--role", "superuser"], None),
        (["user", "create", "x", "--role", "producer", "--max-priority", "urgent"], None),
        (["user", "create", "bad name", "--role", "worker"], None),
        (["user", "create", "x", "--role", "worker", "--password-stdin"], "short\n"),
        (["user", "create", "x"], None),
        (["user", "disable", "ghost"], None),
        (["user", "enable", "ghost"], None),
        (["user", "set-password", "ghost"], "a long enough password\n"),
        (["user", "set-password", "dup"], "short\n"),
        (["token", "create", "ghost"], None),
        (["token", "revoke", "999"], None),
        (["token", "revoke", "abc"], None),
        (["token", "list", "ghost"], None),
        (["jobs", "prune", "--older-than", "7 days"], None),
        (["jobs", "prune", "--older-than", "-1d"], None),
        (["jobs", "prune"], None),
    ],
)
def test_cli_refuses_bad_input_cleanly(
    app: Flask, runner: FlaskCliRunner, args: list[str], stdin: str | None
) -> None:
    make_user(app, "dup", "worker")
    before = _users(app)
    result = runner.invoke(args=args, input=stdin)
    assert result.exit_code != 0
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output
    assert _users(app) == before


def test_user_list_disable_enable(app: Flask, runner: FlaskCliRunner) -> None:
    make_user(app, "alice", "producer")
    make_user(app, "wendy", "worker")
    listing = runner.invoke(args=["user", "list"])
    assert listing.exit_code == 0
    lines = listing.output.splitlines()
    assert lines == ["alice\tproducer\tmedium\tactive", "wendy\tworker\tmedium\tactive"]
    assert runner.invoke(args=["user", "disable", "wendy"]).exit_code == 0
    assert "wendy\tworker\tmedium\tdisabled" in runner.invoke(args=["user", "list"]).output
    assert _users(app)["wendy"][2] is True
    assert runner.invoke(args=["user", "enable", "wendy"]).exit_code == 0
    assert _users(app)["wendy"][2] is False


def test_user_disable_stops_the_users_tokens(
    app: Flask, runner: FlaskCliRunner, client: object
) -> None:
    caller = make_api(app, client, "wendy", "worker")  # type: ignore[arg-type]
    assert caller.get("/jobs").status_code == 200
    assert runner.invoke(args=["user", "disable", "wendy"]).exit_code == 0
    assert caller.get("/jobs").status_code == 401


def test_user_set_password(app: Flask, runner: FlaskCliRunner) -> None:
    make_user(app, "alice", "admin")
    result = runner.invoke(args=["user", "set-password", "alice"], input="brand new password\n")
    assert result.exit_code == 0, result.output
    with app.app_context(), db.read() as conn:
        assert accounts.authenticate_password(conn, "alice", "brand new password") is not None


def test_token_create_list_revoke(app: Flask, runner: FlaskCliRunner) -> None:
    make_user(app, "wendy", "worker")
    created = runner.invoke(args=["token", "create", "wendy", "--label", "ci runner"])
    assert created.exit_code == 0, created.output
    raw = created.output.splitlines()[-1]
    assert raw.startswith(accounts.TOKEN_PREFIX) and " " not in raw
    caller = Api(app.test_client(), raw)
    assert caller.post("/jobs/claim").status_code == 204
    listing = runner.invoke(args=["token", "list"])
    assert listing.exit_code == 0
    [line] = listing.output.splitlines()
    token_id, owner, prefix, label, state, _used, expires = line.split("\t")
    assert expires == "expires never"
    assert (owner, label, state) == ("wendy", "ci runner", "active")
    assert raw not in listing.output and prefix.rstrip("…") == raw[:10]
    assert runner.invoke(args=["token", "list", "wendy"]).output == listing.output
    revoked = runner.invoke(args=["token", "revoke", token_id])
    assert revoked.exit_code == 0, revoked.output
    assert caller.post("/jobs/claim").status_code == 401
    assert "revoked" in runner.invoke(args=["token", "list"]).output
    assert runner.invoke(args=["token", "revoke", token_id]).exit_code != 0


def test_jobs_reap_recovers_expired_leases(app: Flask, runner: FlaskCliRunner) -> None:
    producer = make_api(app, app.test_client(), "p", "producer")
    worker_user = make_user(app, "w", "worker")
    past = utcnow() - timedelta(hours=1)
    for _ in range(3):
        producer.enqueue(max_retries=1, run_at=(past - timedelta(hours=1)).isoformat())
    with app.app_context(), db.transaction() as conn:
        # A live lease first (a claim recovers expired leases on its way), then two claimed
        # an hour ago with a 60 s lease: both expired.
        assert claiming.claim(conn, worker_user.actor(), now=utcnow(), settings=queue_settings())
        for _ in range(2):
            assert claiming.claim(
                conn, worker_user.actor(), now=past, settings=queue_settings(), lease_seconds=60
            )
    result = runner.invoke(args=["jobs", "reap"])
    assert result.exit_code == 0, result.output
    assert "recovered 2" in result.output
    with app.app_context(), db.read() as conn:
        statuses = sorted(conn.execute(text("SELECT status FROM jobs")).scalars())
        kinds = list(conn.execute(text("SELECT kind FROM job_events WHERE kind='lease_expired'")))
    assert statuses == ["pending", "pending", "running"]
    assert len(kinds) == 2
    assert "recovered 0" in runner.invoke(args=["jobs", "reap"]).output


def test_jobs_prune_deletes_old_finished_jobs_only(app: Flask, runner: FlaskCliRunner) -> None:
    producer = make_api(app, app.test_client(), "p", "producer")
    worker_user = make_user(app, "w", "worker")
    old, recent = utcnow() - timedelta(days=8), utcnow() - timedelta(hours=1)
    long_ago = (old - timedelta(days=1)).isoformat()
    ids = [producer.enqueue(run_at=long_ago)["id"] for _ in range(4)]
    with app.app_context(), db.transaction() as conn:
        actor = worker_user.actor()
        for at in (old, recent):
            job = claiming.claim(conn, actor, now=at, settings=queue_settings())
            assert job is not None
            reports.complete(conn, actor, job.id, now=at)
        job = claiming.claim(conn, actor, now=old, settings=queue_settings(), lease_seconds=10**5)
        assert job is not None  # old but still running: never pruned
    result = runner.invoke(args=["jobs", "prune", "--older-than", "7d"])
    assert result.exit_code == 0, result.output
    assert "pruned 1" in result.output
    with app.app_context(), db.read() as conn:
        left = sorted(conn.execute(text("SELECT id FROM jobs")).scalars())
        orphans = conn.execute(
            text("SELECT count(*) FROM job_events WHERE job_id NOT IN (SELECT id FROM jobs)")
        ).scalar()
    assert left == ids[1:]
    assert orphans == 0
    assert "pruned 1" in runner.invoke(args=["jobs", "prune", "--older-than", "30m"]).output


def test_setup_creates_admin_only_on_the_first_run(app: Flask, runner: FlaskCliRunner) -> None:
    first = runner.invoke(args=["setup"])
    assert first.exit_code == 0, first.output
    password = first.output.split("password:")[1].split()[0]
    assert len(password) >= 16
    with app.app_context(), db.read() as conn:
        admin = accounts.authenticate_password(conn, "admin", password)
    assert admin is not None and admin.role == "admin"
    second = runner.invoke(args=["setup"])
    assert second.exit_code == 0
    assert "password" not in second.output
    assert list(_users(app)) == ["admin"]


def test_setup_creates_no_admin_when_a_user_exists(app: Flask, runner: FlaskCliRunner) -> None:
    make_user(app, "someone", "worker")
    result = runner.invoke(args=["setup"])
    assert result.exit_code == 0
    assert "password" not in result.output
    assert list(_users(app)) == ["someone"]


def test_setup_passwords_differ_between_installations(tmp_path: Path) -> None:
    passwords = set()
    for n in range(2):
        app = create_app(base_config(f"sqlite:///{tmp_path / f'{n}.sqlite3'}"))
        output = app.test_cli_runner().invoke(args=["setup"]).output
        passwords.add(output.split("password:")[1].split()[0])
        db.engine(app).dispose()
    assert len(passwords) == 2


# A real process ------------------------------------------------------------------------------


def _flask(
    env: dict[str, str], *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(FLASK), "--app", "app", *args],
        cwd=ROOT,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.slow
def test_cli_in_a_real_process(tmp_path: Path) -> None:
    """The commands as a shell runs them: settings from the environment, warnings as errors,
    their output and exit codes (what each command does is tested in process above)."""
    database = tmp_path / "real.sqlite3"
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLASK_") and k != "PYTHONPATH"}
    env |= {
        "FLASK_DATABASE_URL": f"sqlite:///{database}",
        "FLASK_SECRET_KEY": "k" + secrets.token_hex(24),
        "PYTHONWARNINGS": "error",
    }
    setup = _flask(env, "setup")
    assert setup.returncode == 0, setup.stderr
    assert "username: admin" in setup.stdout
    password = setup.stdout.split("password:")[1].split()[0]
    prod = _flask(
        env,
        "user",
        "create",
        "pat",
        "--role",
        "producer",
        "--password-stdin",
        stdin="pat's long password\n",
    )
    assert prod.returncode == 0, prod.stderr
    created = _flask(env, "token", "create", "pat", "--label", "real")
    assert created.returncode == 0, created.stderr
    token_id = created.stdout.split()[1]  # "token <id> for pat; ..."
    raw = created.stdout.rstrip("\n").splitlines()[-1]

    # The printed password and token work against an app on the same database.
    app = create_app(base_config(f"sqlite:///{database}"))
    try:
        client = app.test_client()
        job = Api(client, raw).enqueue(payload={"via": "cli"})
        assert Api(client, raw).get(f"/jobs/{job['id']}").status_code == 200
        with app.app_context(), db.read() as conn:
            assert accounts.authenticate_password(conn, "admin", password) is not None
            assert accounts.authenticate_password(conn, "pat", "pat's long password") is not None
        assert _flask(env, "token", "revoke", token_id).returncode == 0
        assert Api(client, raw).get("/jobs").status_code == 401
        failed = _flask(env, "user", "create", "pat", "--role", "worker")
        assert failed.returncode != 0 and "already exists" in failed.stderr
        assert "Traceback" not in failed.stderr
    finally:
        db.engine(app).dispose()


def test_token_create_output_format(app: Flask, runner: FlaskCliRunner) -> None:
    make_user(app, "wendy", "worker")
    lines = runner.invoke(args=["token", "create", "wendy"]).output.splitlines()
    assert len(lines) >= 2
    assert lines[-1].startswith(accounts.TOKEN_PREFIX)
    assert all(lines[-1] not in line for line in lines[:-1])
    assert make_token(app, "wendy") != lines[-1]


@pytest.mark.parametrize("token_id", ["99999999999999999999", "0", "-1", "x"])
def test_token_revoke_refuses_impossible_ids_cleanly(runner: FlaskCliRunner, token_id: str) -> None:
    result = runner.invoke(args=["token", "revoke", token_id])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output


def test_user_list_shows_the_cap_enqueue_enforces(app: Flask, runner: FlaskCliRunner) -> None:
    """An admin may enqueue any priority, so its cap reads ``critical`` whatever is stored."""
    make_user(app, "root", "admin", max_priority="low")
    assert "root\tadmin\tcritical\tactive" in runner.invoke(args=["user", "list"]).output
    created = runner.invoke(args=["user", "create", "chief", "--role", "admin"])
    assert "max priority critical" in created.output
