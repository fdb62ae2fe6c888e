"""The schedule service on both engines: slots, catch-up after an outage, changes, roles.
The clock is the ``now`` argument throughout."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from flask import Flask
from sqlalchemy import Connection, select, update

from app.audit.actions import Origin
from app.infra import db
from app.queue.contract.schedules import (
    ScheduleCreate,
    ScheduleUpdate,
    parse,
)
from app.queue.rules.settings import QueueSettings
from app.queue.sql import jobs as jobs_sql
from app.queue.usecases import schedules
from app.queue.vocabulary.actors import Actor
from app.queue.vocabulary.errors import (
    Conflict,
    InvalidInput,
    NotFound,
)
from app.queue.vocabulary.jobs import Job
from app.queue.vocabulary.schedules import Schedule
from app.queue.vocabulary.timeutil import utcnow
from app.storage.schema import jobs, users
from tests.backends import every_backend  # noqa: F401 (run on both engines)
from tests.builders import make_user

T0 = datetime(2030, 1, 1, 9, 30, tzinfo=UTC)  # a Tuesday
GRACE = timedelta(minutes=5)
DEEP: Any = 1
for _ in range(40):
    DEEP = [DEEP]


@dataclass
class Desk:
    """The schedule service on the test database, an admin and a producer."""

    app: Flask
    admin: Actor
    producer: Actor

    @property
    def settings(self) -> QueueSettings:
        return QueueSettings.from_config(self.app.config)

    @contextmanager
    def tx(self) -> Iterator[Connection]:
        with db.transaction(self.app) as conn:
            yield conn

    def create(self, now: datetime = T0, **fields: Any) -> Schedule:
        body = {"name": "hourly", "cron": "0 * * * *", "type": "email.send", **fields}
        with self.tx() as conn:
            return schedules.create(
                conn,
                self.admin,
                parse(ScheduleCreate, body, self.settings),
                now=now,
                origin=Origin(self.admin.name),
            )

    def update(self, schedule_id: int, now: datetime = T0, **fields: Any) -> Schedule:
        request = parse(ScheduleUpdate, fields, self.settings)
        with self.tx() as conn:
            return schedules.update(
                conn, self.admin, schedule_id, request, now=now, origin=Origin(self.admin.name)
            )

    def tick(self, now: datetime, settings: QueueSettings | None = None) -> list[Job]:
        with self.tx() as conn:
            fired = schedules.tick(
                conn, now=now, settings=settings or self.settings, grace=GRACE
            ).value
        return [f.job for f in fired if f.job is not None]

    def get(self, schedule_id: int) -> Schedule:
        with self.tx() as conn:
            return schedules.get(conn, self.admin, schedule_id)

    def jobs(self) -> list[Job]:
        with db.read(self.app) as conn:
            ids = conn.execute(select(jobs.c.id).order_by(jobs.c.id)).scalars().all()
            return [found for i in ids if (found := jobs_sql.get_job(conn, i)) is not None]


@pytest.fixture
def desk(app: Flask) -> Desk:
    return Desk(
        app,
        admin=make_user(app, "sched-admin", "admin").actor(),
        producer=make_user(app, "sched-producer", "producer").actor(),
    )


def at(hour: int, minute: int = 0, second: int = 0, day: int = 1) -> datetime:
    return datetime(2030, 1, day, hour, minute, second, tzinfo=UTC)


def test_each_slot_enqueues_exactly_one_job(desk: Desk) -> None:
    schedule = desk.create(priority="high", payload={"report": "sales"})
    assert schedule.next_run_at == at(10)
    assert desk.tick(at(9, 59, 59)) == []
    first = desk.tick(at(10, 0, 1))
    assert [j.type for j in first] == ["email.send"]
    assert desk.tick(at(10, 0, 1)) == [] and desk.tick(at(10, 30)) == []  # the slot is taken
    assert desk.get(schedule.id).next_run_at == at(11)
    assert desk.get(schedule.id).last_run_at == at(10)
    assert len(desk.tick(at(11))) == 1  # a slot falling exactly on "now" is due
    made = desk.jobs()
    assert len(made) == 2
    assert (made[0].priority, made[0].payload, made[0].created_by) == (20, {"report": "sales"}, 1)
    with db.read(desk.app) as conn:
        events = jobs_sql.list_events(conn, made[0].id)
    assert [(e.kind, e.actor) for e in events] == [("enqueued", "schedule:hourly")]


@pytest.mark.parametrize(("catch_up", "expected"), [("skip", 0), ("one", 1)])
def test_slots_missed_during_an_outage(desk: Desk, catch_up: str, expected: int) -> None:
    schedule = desk.create(catch_up=catch_up)
    assert len(desk.tick(at(10, 0, 5))) == 1
    # down from 10:01 to 13:30: the slots of 11, 12 and 13 o'clock were missed
    after_outage = desk.tick(at(13, 30))
    assert len(after_outage) == expected
    moved = desk.get(schedule.id)
    assert moved.next_run_at == at(14)  # the first slot after the outage, either way
    assert moved.last_run_at == (at(13) if expected else at(10))
    assert desk.tick(at(13, 45)) == []  # no second catch-up job
    assert len(desk.tick(at(14, 0, 2))) == 1  # back to one job per slot
    assert len(desk.jobs()) == 2 + expected


def test_a_short_gap_within_the_grace_is_not_an_outage(desk: Desk) -> None:
    desk.create(cron="* * * * *", catch_up="skip")
    assert len(desk.tick(at(9, 31))) == 1
    # nobody ticked for three minutes: the latest slot (09:34) is on time, the others passed
    assert len(desk.tick(at(9, 34, 30))) == 1
    assert len(desk.jobs()) == 2


def test_disabled_schedules_never_fire_and_resume_from_now(desk: Desk) -> None:
    schedule = desk.create()
    disabled = desk.update(schedule.id, enabled=False)
    assert (disabled.enabled, disabled.next_run_at, schedules.next_runs(disabled, T0)) == (
        False,
        None,
        [],
    )
    assert desk.tick(at(15)) == []
    enabled = desk.update(schedule.id, now=at(15, 10), enabled=True)
    assert enabled.next_run_at == at(16)  # slots missed while disabled are not caught up
    assert desk.tick(at(15, 30)) == []


def _set_creator(desk: Desk, **values: Any) -> None:
    with desk.tx() as conn:
        conn.execute(update(users).where(users.c.id == desk.admin.id).values(**values))


def test_a_disabled_or_demoted_creators_schedules_stop_enqueuing_in_their_name(
    desk: Desk,
) -> None:
    """Schedules run as the admin who made them: once that account is disabled or no longer
    an admin, their slots pass without a job (the account cannot act, nor can its schedules)."""
    desk.create()
    assert len(desk.tick(at(10, 0, 1))) == 1
    _set_creator(desk, disabled=True)
    assert desk.tick(at(11, 0, 1)) == []
    _set_creator(desk, disabled=False, role="producer")
    assert desk.tick(at(12, 0, 1)) == []
    _set_creator(desk, role="admin")
    assert len(desk.tick(at(13, 0, 1))) == 1  # back in charge: the next slot fires
    assert len(desk.jobs()) == 2


def test_changing_the_timing_moves_the_next_slot_and_other_changes_keep_it(desk: Desk) -> None:
    schedule = desk.create()
    renamed = desk.update(schedule.id, now=at(9, 45), name="every hour", payload={"a": 1})
    assert renamed.next_run_at == at(10) and renamed.name == "every hour"
    paris = desk.update(schedule.id, now=at(9, 45), cron="0 9 * * *", timezone="Europe/Paris")
    assert paris.next_run_at == datetime(2030, 1, 2, 8, tzinfo=UTC)  # 09:00 Paris in winter
    assert schedules.next_runs(paris, at(9, 45))[:2] == [
        datetime(2030, 1, 2, 8, tzinfo=UTC),
        datetime(2030, 1, 3, 8, tzinfo=UTC),
    ]


def test_names_are_unique(desk: Desk) -> None:
    desk.create()
    other = desk.create(name="daily", cron="0 0 * * *")
    with pytest.raises(Conflict, match="already exists"):
        desk.create()
    with pytest.raises(Conflict, match="already exists"):
        desk.update(other.id, name="hourly")
    assert desk.get(other.id).name == "daily"


def test_run_now_enqueues_one_job_and_leaves_the_slots(desk: Desk) -> None:
    schedule = desk.create(enabled=False)
    with desk.tx() as conn:
        job = schedules.run_now(
            conn,
            desk.admin,
            schedule.id,
            now=at(9, 40),
            settings=desk.settings,
            origin=Origin(desk.admin.name),
        ).value
    assert job.status == "pending" and job.run_at == at(9, 40)
    after = desk.get(schedule.id)
    assert (after.last_run_at, after.next_run_at) == (at(9, 40), None)


def test_a_type_removed_from_the_configuration_enqueues_nothing(desk: Desk) -> None:
    schedule = desk.create()
    narrower = replace(desk.settings, job_types=("report.build",))
    assert desk.tick(at(10, 0, 1), settings=narrower) == []
    assert desk.get(schedule.id).next_run_at == at(11)  # the slot passed, and the log says why
    with pytest.raises(Conflict, match="not an allowed job type"), desk.tx() as conn:
        schedules.run_now(
            conn,
            desk.admin,
            schedule.id,
            now=at(10, 5),
            settings=narrower,
            origin=Origin(desk.admin.name),
        )
    assert desk.jobs() == []


def test_deleting_keeps_the_jobs_already_made(desk: Desk) -> None:
    schedule = desk.create()
    desk.tick(at(10))
    with desk.tx() as conn:
        schedules.delete(
            conn, desk.admin, schedule.id, now=utcnow(), origin=Origin(desk.admin.name)
        )
    with pytest.raises(NotFound):
        desk.get(schedule.id)
    assert len(desk.jobs()) == 1


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": " padded"}, "name"),
        ({"name": "x" * 51}, "name"),
        ({"cron": "every day"}, "cron"),
        ({"timezone": "Europe/Atlantis"}, "timezone"),
        ({"type": "rm.rf"}, "type"),
        ({"payload": {"deep": DEEP}}, "payload"),
        ({"payload": {"nul": "a\x00b"}}, "payload"),
        ({"priority": 30}, "priority"),
        ({"enabled": "yes"}, "enabled"),
        ({"catch_up": "all"}, "catch_up"),
        ({"owner": "me"}, "owner"),
    ],
)
def test_bad_fields_are_refused_one_by_one(desk: Desk, body: dict[str, Any], field: str) -> None:
    full = {"name": "ok", "cron": "0 * * * *", "type": "email.send", **body}
    with pytest.raises(InvalidInput) as caught:
        parse(ScheduleCreate, full, desk.settings)
    assert list(caught.value.errors) == [field]
