"""Backoff with full jitter, retry_in, retryable, and scheduled enqueues (run_at, delay_seconds).

The clock is driven through the service's ``now`` parameter; jitter through its ``uniform``."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from app.queue.rules.backoff import backoff_seconds
from tests.backends import every_backend  # noqa: F401 (run on both engines)
from tests.builders import Api
from tests.harness import T0, Queue

BASE = 2.0
CAP = 50.0


@pytest.fixture
def app_config() -> dict[str, Any]:
    return {
        "BACKOFF_BASE_SECONDS": BASE,
        "BACKOFF_CAP_SECONDS": CAP,
        "JOB_TYPE_SETTINGS": {
            "report.build": {"backoff_base_seconds": 100, "backoff_cap_seconds": 150}
        },
    }


def _window(retry: int, base: float = BASE, cap: float = CAP) -> float:
    return min(cap, base * 2 ** min(retry - 1, 62))


class Recording:
    """A ``uniform`` that remembers its bounds and answers one end of them."""

    def __init__(self, end: str = "high") -> None:
        self.end = end
        self.calls: list[tuple[float, float]] = []

    def __call__(self, low: float, high: float) -> float:
        self.calls.append((low, high))
        return high if self.end == "high" else low


@pytest.mark.parametrize("retry", [1, 2, 3, 4, 5, 6, 7, 30, 100, 10_000])
def test_backoff_window_is_exponential_capped_full_jitter(retry: int) -> None:
    uniform = Recording()
    assert backoff_seconds(retry, base=BASE, cap=CAP, uniform=uniform) == _window(retry)
    assert uniform.calls == [(0.0, _window(retry))]


def _fail_until_exhausted(queue: Queue, job_type: str, uniform: Recording) -> list[float]:
    """Claim and fail one job until it is failed; the run_at delays chosen along the way."""
    job = queue.enqueue(type=job_type, max_retries=4)
    delays: list[float] = []
    now = T0
    for _ in range(5):
        claimed = queue.claim(now=now)
        assert claimed is not None and claimed.id == job.id
        failed = queue.fail(job.id, now=now, uniform=uniform)
        if failed.status == "failed":
            assert failed.retry_count == 4 and failed.finished_at == now
            return delays
        delays.append((failed.run_at - now).total_seconds())
        assert queue.claim(now=failed.run_at - timedelta(microseconds=1)) is None
        now = failed.run_at
    raise AssertionError("never failed")


def test_fail_with_retries_left_schedules_run_at_at_the_window(queue: Queue) -> None:
    assert _fail_until_exhausted(queue, "email.send", Recording("high")) == [
        _window(n) for n in (1, 2, 3, 4)
    ]


def test_fail_with_zero_jitter_is_due_at_once(queue: Queue) -> None:
    assert _fail_until_exhausted(queue, "email.send", Recording("low")) == [0.0] * 4


def test_backoff_per_type(queue: Queue) -> None:
    expected = [_window(n, 100, 150) for n in (1, 2, 3, 4)]
    assert _fail_until_exhausted(queue, "report.build", Recording("high")) == expected


def test_api_backoff_within_bounds(producer: Api, worker: Api) -> None:
    for _ in range(5):
        job = producer.enqueue(max_retries=5)
        claimed = worker.claim()
        assert claimed is not None and claimed["id"] == job["id"]
        body = worker.post(f"/jobs/{job['id']}/fail", {"error": "boom"}).get_json()
        assert (body["status"], body["retry_count"]) == ("pending", 1)
        assert body["worker_id"] is None and body["lease_expires_at"] is None
        delay = (
            datetime.fromisoformat(body["run_at"]) - datetime.fromisoformat(body["updated_at"])
        ).total_seconds()
        assert 0 <= delay <= _window(1), delay
        # Jitter may make it due at once; cancel it so the next claim takes the next job.
        assert producer.post(f"/jobs/{job['id']}/cancel").status_code == 200


def test_real_jitter_stays_in_the_growing_window(queue: Queue) -> None:
    """The default jitter (SystemRandom) stays inside [0, window] for each retry number."""
    job = queue.enqueue(max_retries=6)
    now = T0
    for retry in range(1, 7):
        assert queue.claim(now=now) is not None
        failed = queue.fail(job.id, now=now)
        delay = (failed.run_at - now).total_seconds()
        assert 0 <= delay <= _window(retry), (retry, delay)
        now = failed.run_at


def test_retry_in_overrides_the_policy(producer: Api, worker: Api) -> None:
    job = producer.enqueue()
    assert worker.claim() is not None
    body = worker.post(f"/jobs/{job['id']}/fail", {"error": "rate limited", "retry_in": 3600})
    failed = body.get_json()
    delay = datetime.fromisoformat(failed["run_at"]) - datetime.fromisoformat(failed["updated_at"])
    assert delay == timedelta(seconds=3600)
    assert worker.claim() is None
    bad = worker.post(f"/jobs/{job['id']}/fail", {"error": "x", "retry_in": -1})
    assert bad.status_code == 422


def test_retry_in_zero_is_due_immediately(producer: Api, worker: Api) -> None:
    job = producer.enqueue()
    assert worker.claim() is not None
    worker.post(f"/jobs/{job['id']}/fail", {"error": "x", "retry_in": 0})
    again = worker.claim()
    assert again is not None and (again["id"], again["attempt"]) == (job["id"], 2)


def test_not_retryable_fails_at_once(producer: Api, worker: Api, admin: Api) -> None:
    job = producer.enqueue(max_retries=5)
    assert worker.claim() is not None
    response = worker.post(f"/jobs/{job['id']}/fail", {"error": "bad input", "retryable": False})
    failed = response.get_json()
    assert (failed["status"], failed["retry_count"]) == ("failed", 0)
    assert failed["finished_at"] is not None
    last = admin.get(f"/jobs/{job['id']}/events").get_json()["events"][-1]
    assert (last["kind"], last["to_status"]) == ("failed", "failed")
    assert "not retryable" in last["note"]
    assert worker.post(
        f"/jobs/{job['id']}/fail", {"error": "x", "retryable": "no"}
    ).status_code in (
        409,
        422,
    )


# --- scheduling ----------------------------------------------------------------------------


def test_delay_seconds_is_not_claimable_before_then(queue: Queue) -> None:
    job = queue.enqueue(delay_seconds=60)
    assert job.run_at == T0 + timedelta(seconds=60)
    assert queue.claim(now=T0 + timedelta(seconds=59, microseconds=999_999)) is None
    claimed = queue.claim(now=T0 + timedelta(seconds=60))
    assert claimed is not None and claimed.id == job.id


def test_run_at_is_not_claimable_before_then(queue: Queue) -> None:
    job = queue.enqueue(run_at="2030-01-01T02:00:00+01:00")  # 01:00 UTC
    assert job.run_at == T0 + timedelta(hours=1)
    assert queue.claim(now=T0 + timedelta(minutes=59)) is None
    claimed = queue.claim(now=T0 + timedelta(hours=1))
    assert claimed is not None and claimed.id == job.id


def test_a_later_job_does_not_block_a_due_one(queue: Queue) -> None:
    later = queue.enqueue(delay_seconds=300, priority="medium")
    due = queue.enqueue()
    claimed = queue.claim(now=T0 + timedelta(seconds=1))
    assert claimed is not None and claimed.id == due.id
    assert queue.claim(now=T0 + timedelta(seconds=2)) is None
    assert queue.claim(now=T0 + timedelta(seconds=300)).id == later.id  # type: ignore[union-attr]


def test_schedule_through_the_api(producer: Api, worker: Api) -> None:
    producer.enqueue(delay_seconds=3600)
    producer.enqueue(run_at="2999-01-01T00:00:00Z")
    assert worker.claim() is None
    past = producer.enqueue(run_at="2001-01-01T00:00:00Z")
    claimed = worker.claim()
    assert claimed is not None and claimed["id"] == past["id"]
    for bad in (
        {"run_at": "tomorrow"},
        {"run_at": "2030-01-01T00:00:00"},  # no offset
        {"delay_seconds": -1},
        {"delay_seconds": 5, "run_at": "2030-01-01T00:00:00Z"},
    ):
        response = producer.post("/jobs", {"type": "email.send", **bad})
        assert response.status_code == 422, (bad, response.get_json())
