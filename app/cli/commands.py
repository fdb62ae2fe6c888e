"""``flask --app app`` commands: db, user, token, jobs, and the first-run setup. They act as the
operator (an admin), whom the audit log names ``cli:<OS user>``."""

from __future__ import annotations

import getpass
import secrets
import sys

import click
from flask import Flask, current_app
from flask.cli import AppGroup, with_appcontext

from app.accounts import service as accounts
from app.accounts.errors import AccountError
from app.audit.actions import Origin
from app.cli.audit import audit_cli
from app.cli.pruning import parse_duration, prune_in_batches
from app.infra import db, housekeeper
from app.infra.queue_settings import queue_settings
from app.queue.usecases import claiming, job_actions
from app.queue.vocabulary.states import PRIORITIES, Role
from app.queue.vocabulary.timeutil import utcnow
from app.storage import migrate
from app.storage.transactions import announce

db_cli = AppGroup("db", help="Create or migrate the database schema.")
user_cli = AppGroup("user", help="Manage users.")
token_cli = AppGroup("token", help="Manage API tokens.")
jobs_cli = AppGroup("jobs", help="Queue maintenance.")

MAX_ROW_ID = 2**62  # ids fit a 64-bit column; larger numbers are refused, not overflowed


def operator_origin() -> Origin:
    """The command line acts as ``cli:<OS user>`` (``cli`` when the OS cannot name the user),
    from no address."""
    try:
        return Origin(f"cli:{getpass.getuser()}")
    except (OSError, KeyError):
        return Origin("cli")


def _fail(exc: AccountError) -> None:
    raise click.ClickException(exc.detail)


def _password_from_stdin() -> str:
    """The password on stdin: on a terminal asked for twice, unechoed, until both agree;
    from a pipe or a file its first line, so scripts need not say it twice."""
    if sys.stdin.isatty():
        return str(click.prompt("Password", hide_input=True, confirmation_prompt=True, err=True))
    return sys.stdin.readline().rstrip("\r\n")


@db_cli.command("upgrade")
def db_upgrade() -> None:
    """Create the schema or migrate it to the latest revision."""
    migrate.upgrade(db.engine(), payload_keys=current_app.config["PAYLOAD_SEARCH_KEYS"])
    click.echo("database is at the latest revision")


@user_cli.command("create")
@click.argument("name")
@click.option("--role", type=click.Choice([r.value for r in Role]), required=True)
@click.option(
    "--max-priority",
    type=click.Choice(list(PRIORITIES)),
    default=None,
    help="Highest priority a producer may enqueue (default: DEFAULT_MAX_PRIORITY).",
)
@click.option(
    "--password-stdin",
    is_flag=True,
    help="Read a login password from stdin (asked twice, unechoed, on a terminal).",
)
def user_create(name: str, role: str, max_priority: str | None, password_stdin: bool) -> None:
    """Create a user (without --password-stdin it can only use API tokens)."""
    password = _password_from_stdin() if password_stdin else None
    cap = max_priority or current_app.config["DEFAULT_MAX_PRIORITY"]
    try:
        with db.transaction() as conn:
            user = accounts.create_user(
                conn,
                accounts.OPERATOR,
                name,
                role,
                now=utcnow(),
                origin=operator_origin(),
                password=password,
                max_priority=cap,
            )
    except AccountError as exc:
        _fail(exc)
    click.echo(
        f"created user {user.name} (role {user.role}, max priority {user.max_priority_label})"
    )


@user_cli.command("list")
def user_list() -> None:
    """List users."""
    with db.read() as conn:
        users = accounts.list_users(conn, accounts.OPERATOR)
    for user in users:
        state = "disabled" if user.disabled else "active"
        click.echo(f"{user.name}\t{user.role}\t{user.max_priority_label}\t{state}")


def _set_disabled(name: str, disabled: bool) -> None:
    try:
        with db.transaction() as conn:
            accounts.set_disabled(
                conn,
                accounts.OPERATOR,
                name,
                disabled=disabled,
                now=utcnow(),
                origin=operator_origin(),
            )
    except AccountError as exc:
        _fail(exc)
    click.echo(f"{'disabled' if disabled else 'enabled'} user {name}")


@user_cli.command("disable")
@click.argument("name")
def user_disable(name: str) -> None:
    """Disable a user: sessions and API tokens stop working at once."""
    _set_disabled(name, True)


@user_cli.command("enable")
@click.argument("name")
def user_enable(name: str) -> None:
    """Enable a disabled user again."""
    _set_disabled(name, False)


@user_cli.command("set-password")
@click.argument("name")
def user_set_password(name: str) -> None:
    """Set a user's password from stdin (asked twice, unechoed, on a terminal)."""
    password = _password_from_stdin()
    try:
        with db.transaction() as conn:
            accounts.set_password(
                conn, accounts.OPERATOR, name, password, now=utcnow(), origin=operator_origin()
            )
    except AccountError as exc:
        _fail(exc)
    click.echo(f"password of {name} changed")


@token_cli.command("create")
@click.argument("name")
@click.option("--label", default="", help="What the token is for.")
@click.option(
    "--expires-in",
    default=None,
    help="Lifetime such as 90d, 12h or 2w (default: until revoked).",
)
def token_create(name: str, label: str, expires_in: str | None) -> None:
    """Issue an API token for a user; it is printed once, alone on the last line."""
    lifetime = parse_duration(expires_in) if expires_in is not None else None
    try:
        with db.transaction() as conn:
            token, raw = accounts.create_token(
                conn,
                accounts.OPERATOR,
                name,
                now=utcnow(),
                origin=operator_origin(),
                label=label,
                expires_in=lifetime,
            )
    except AccountError as exc:
        _fail(exc)
    expiry = f", expires {token.expires_at.isoformat()}" if token.expires_at else ""
    click.echo(f"token {token.id} for {name}{expiry}; it is shown once, store it now:")
    click.echo(raw)


@token_cli.command("list")
@click.argument("name", required=False)
def token_list(name: str | None) -> None:
    """List tokens (all, or one user's)."""
    try:
        with db.read() as conn:
            tokens = accounts.list_tokens(conn, accounts.OPERATOR, name)
    except AccountError as exc:
        _fail(exc)
    now = utcnow()
    for token, owner in tokens:
        used = token.last_used_at.isoformat() if token.last_used_at else "never"
        expires = token.expires_at.isoformat() if token.expires_at else "never"
        click.echo(
            f"{token.id}\t{owner}\t{token.prefix}…\t{token.label}\t{token.state(now)}"
            f"\tlast used {used}\texpires {expires}"
        )


@token_cli.command("revoke")
@click.argument("token_id", type=click.IntRange(1, MAX_ROW_ID))
def token_revoke(token_id: int) -> None:
    """Revoke a token by id (see `token list`)."""
    try:
        with db.transaction() as conn:
            accounts.revoke_token(
                conn, accounts.OPERATOR, token_id, now=utcnow(), origin=operator_origin()
            )
    except AccountError as exc:
        _fail(exc)
    click.echo(f"revoked token {token_id}")


@jobs_cli.command("reap")
def jobs_reap() -> None:
    """Recover running jobs whose lease expired (as failed attempts)."""
    settings = queue_settings()
    total = 0
    while True:
        with db.transaction() as conn:
            recovered = claiming.recover_expired(
                conn, now=utcnow(), settings=settings, limit=settings.recover_batch
            )
            announce(recovered.effects)
        total += recovered.value
        if recovered.value < settings.recover_batch:
            break
    click.echo(f"recovered {total} expired lease(s)")


@jobs_cli.command("tick")
def jobs_tick() -> None:
    """Housekeeping (run it every minute from cron or a systemd timer): enqueue the jobs of due
    schedules, fail attempts past their deadlines, prune what retention says is old."""
    now = utcnow()
    keeping = housekeeper.housekeeping()
    fired = keeping.fire_due(now)
    enqueued = [f"{f.schedule.name} -> job {f.job.id}" for f in fired if f.job is not None]
    skipped = [f.schedule.name for f in fired if f.job is None]
    click.echo(f"enqueued {len(enqueued)} scheduled job(s)" + "".join(f"\n  {e}" for e in enqueued))
    if skipped:
        click.echo(f"skipped missed slots of: {', '.join(skipped)}")
    click.echo(f"timed out {keeping.time_out_overdue(now)} attempt(s) past their deadline")
    pruned = keeping.prune(now)
    per_status = ", ".join(f"{n} {status}" for status, n in pruned.jobs.items())
    click.echo(
        f"pruned {pruned.job_total} finished job(s)"
        + (f" ({per_status})" if per_status else "")
        + f", {pruned.events} event(s), {pruned.audit_events} audit row(s)"
    )


@jobs_cli.command("prune")
@click.option("--older-than", "older_than", required=True, help="Age such as 7d or 12h.")
def jobs_prune(older_than: str) -> None:
    """Delete finished jobs (and their events) older than the given age, batch by batch."""
    total = prune_in_batches(
        older_than,
        lambda conn, cutoff, batch: job_actions.prune(conn, finished_before=cutoff, batch=batch),
    )
    click.echo(f"pruned {total} finished job(s) older than {older_than}")


@click.command("setup")
@click.option(
    "--url",
    default="http://127.0.0.1:5000",
    show_default=True,
    help="Where the server answers (make run passes HOST and PORT), for the sign-in hint.",
)
@with_appcontext  # app.cli.add_command does not wrap plain click commands (the runner needs it)
def setup(url: str) -> None:
    """Migrate the database and, on the very first run, create the user `admin`."""
    migrate.upgrade(db.engine(), payload_keys=current_app.config["PAYLOAD_SEARCH_KEYS"])
    password = secrets.token_urlsafe(18)
    with db.transaction() as conn:
        if accounts.has_users(conn):
            click.echo("database ready; users already exist")
            return
        accounts.create_user(
            conn,
            accounts.OPERATOR,
            "admin",
            Role.ADMIN,
            now=utcnow(),
            origin=operator_origin(),
            password=password,
        )
    click.echo(f"created the first user. Log in at {url.rstrip('/')}/login with")
    click.echo("  username: admin")
    click.echo(f"  password: {password}")
    click.echo("This password is shown once.")


def init_app(app: Flask) -> None:
    """Register the command groups."""
    for command in (db_cli, user_cli, token_cli, jobs_cli, audit_cli, setup):
        app.cli.add_command(command)
