"""The client's admin helpers against a real gunicorn server: job types (pause, resume,
limits) and schedules, typed errors included."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from conftest import Server, start_server
from queuelog_client import Client, Conflict, Forbidden, JobType, NotFound, Schedule, Unprocessable

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """This module's own server, with a configured limit to override."""
    yield from start_server(
        tmp_path_factory.mktemp("admin-server"),
        JOB_TYPE_SETTINGS={"report.build": {"max_running": 3}},
    )


def by_type(client: Client) -> dict[str, JobType]:
    return {job_type.type: job_type for job_type in client.types()}


def test_pause_resume_and_limits(admin: Client, producer: Client, worker: Client) -> None:
    listed = by_type(admin)
    assert list(listed) == ["email.send", "report.build", "webhook.deliver"]
    assert (listed["report.build"].max_running, listed["report.build"].paused) == (3, False)
    assert set(listed["email.send"].counts) == {
        "pending", "running", "completed", "failed", "cancelled",
    }  # fmt: skip
    job = producer.enqueue("webhook.deliver")
    paused = admin.pause("webhook.deliver")
    assert paused.paused and paused.counts["pending"] >= 1
    assert worker.claim(max_jobs=5, types=["webhook.deliver"]) == []
    assert not admin.resume("webhook.deliver").paused
    assert [j.id for j in worker.claim(max_jobs=5, types=["webhook.deliver"])] == [job.id]

    limited = admin.set_limits("report.build", max_running=1, rate_limit="100/minute")
    assert (limited.max_running, limited.rate_limit) == (1, "100/minute")
    producer.enqueue_many([{"type": "report.build"} for _ in range(3)])
    assert len(worker.claim(max_jobs=10, types=["report.build"])) == 1
    kept = admin.set_limits("report.build", max_running=None)  # the rate limit stays
    assert (kept.max_running, kept.rate_limit) == (3, "100/minute")
    assert len(worker.claim(max_jobs=10, types=["report.build"])) == 2
    per_partition = admin.set_limits("email.send", partition_max_running=1)
    assert (per_partition.partition_max_running, per_partition.partition_rate_limit) == (1, None)
    producer.enqueue_many([{"type": "email.send", "partition": p} for p in "aab"])
    claimed = worker.claim(max_jobs=10, types=["email.send"])
    assert len(claimed) == 2 and {job.partition for job in claimed} == {"a", "b"}


def test_type_errors_are_typed(admin: Client, producer: Client) -> None:
    with pytest.raises(Forbidden):
        producer.types()
    with pytest.raises(Forbidden):
        producer.pause("email.send")
    with pytest.raises(NotFound):
        admin.pause("no.such.type")
    with pytest.raises(NotFound):
        admin.pause("a/b")  # sent as one path segment, not a route of its own
    with pytest.raises(Unprocessable) as bad:
        admin.set_limits("email.send", rate_limit="10 per minute")
    assert "rate_limit" in bad.value.errors
    with pytest.raises(TypeError, match="at least one"):
        admin.set_limits("email.send")


def test_schedules_round_trip(admin: Client, producer: Client) -> None:
    created = admin.create_schedule(
        "client digest", "30 8 * * 1-5", "email.send", {"digest": True},
        timezone="America/New_York", priority="medium",
    )  # fmt: skip
    assert isinstance(created, Schedule) and created.id > 0
    assert created.description and created.payload == {"digest": True}
    assert len(created.next_runs) == 5
    assert all(t.tzinfo is not None and t > datetime.now(UTC) for t in created.next_runs)
    assert admin.schedule(created.id) == created
    assert created.id in {s.id for s in admin.schedules()}
    disabled = admin.update_schedule(created.id, enabled=False)
    assert (disabled.enabled, disabled.next_runs) == (False, [])
    job = admin.run_schedule(created.id)
    assert (job.type, job.payload, job.priority) == ("email.send", {"digest": True}, "medium")
    assert admin.schedule(created.id).last_run_at == job.created_at
    with pytest.raises(Conflict):
        admin.create_schedule("client digest", "0 * * * *", "email.send")
    with pytest.raises(Unprocessable) as bad:
        admin.create_schedule("bad cron", "every day", "email.send")
    assert "cron" in bad.value.errors
    with pytest.raises(TypeError, match="colour"):
        admin.create_schedule("x", "0 * * * *", "email.send", colour="red")
    with pytest.raises(Forbidden):
        producer.schedules()
    admin.delete_schedule(created.id)
    with pytest.raises(NotFound):
        admin.schedule(created.id)
