"""``flask jobs tick``: enqueues the jobs of due schedules once, and says what it did."""

from __future__ import annotations

from datetime import timedelta

from flask import Flask
from flask.testing import FlaskCliRunner

from app.audit.actions import Origin
from app.infra import db
from app.infra.queue_settings import queue_settings
from app.queue.contract.schedules import ScheduleCreate, parse
from app.queue.usecases import schedules
from app.queue.vocabulary.timeutil import utcnow
from tests.builders import make_user


def test_tick_enqueues_due_schedules_once(app: Flask, runner: FlaskCliRunner) -> None:
    admin = make_user(app, "cli-admin", "admin").actor()
    now = utcnow()
    # hourly at the minute of half an hour ago: its last slot is far beyond the grace
    hourly = f"{(now - timedelta(minutes=30)).minute} * * * *"
    with app.app_context(), db.transaction() as conn:
        for name, cron, catch_up in (
            ("due", "* * * * *", "skip"),
            ("long missed", hourly, "skip"),
            ("caught up", hourly, "one"),
        ):
            request = parse(
                ScheduleCreate,
                {"name": name, "cron": cron, "type": "email.send", "catch_up": catch_up},
                queue_settings(),
            )
            schedules.create(
                conn, admin, request, now=now - timedelta(hours=3), origin=Origin(admin.name)
            )
    result = runner.invoke(args=["jobs", "tick"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "enqueued 2 scheduled job(s)"
    assert sorted(line.split(" -> ")[0].strip() for line in lines[1:3]) == ["caught up", "due"]
    assert lines[3] == "skipped missed slots of: long missed"
    again = runner.invoke(args=["jobs", "tick"])
    assert again.output.startswith("enqueued 0 scheduled job(s)")
