"""Long-polling claims held back by flow control: a resumed type rings them, a finished job of
a type at its max_running lets them in at their next look, a full rate window at its end."""

from __future__ import annotations

import time

from flask import Flask

from tests.api.test_longpoll import _waiting_claim
from tests.builders import Api

RECHECK = 0.5  # claiming.RECHECK


def patch(admin: Api, job_type: str, **change: object) -> None:
    response = admin.client.patch(f"/types/{job_type}", json=change, headers=admin.headers())
    assert response.status_code == 200, response.get_json()


def test_resuming_a_type_wakes_a_waiting_claim(
    app: Flask, admin: Api, producer: Api, worker: Api
) -> None:
    patch(admin, "email.send", paused=True)
    job = producer.enqueue()
    result = _waiting_claim(app, worker, wait_seconds=20)
    time.sleep(0.3)
    patch(admin, "email.send", paused=False)
    resumed = time.monotonic()
    claimed, at = result()
    assert claimed is not None and claimed["id"] == job["id"]
    assert at - resumed < 1.0


def test_a_slot_freed_under_max_running_lets_a_waiting_claim_in(
    app: Flask, admin: Api, producer: Api, worker: Api, other_worker: Api
) -> None:
    patch(admin, "report.build", max_running=1)
    first, second = producer.enqueue("report.build"), producer.enqueue("report.build")
    held = worker.claim()
    assert held is not None and held["id"] == first["id"]
    result = _waiting_claim(app, other_worker, wait_seconds=20, types=["report.build"])
    time.sleep(0.3)
    worker.post(f"/jobs/{first['id']}/complete", {"attempt": held["attempt"]})
    freed = time.monotonic()
    claimed, at = result()
    assert claimed is not None and claimed["id"] == second["id"]
    assert at - freed < RECHECK + 1.0  # not the end of the 20 s wait


def test_a_full_rate_window_wakes_a_waiting_claim_when_it_ends(
    app: Flask, admin: Api, producer: Api, worker: Api
) -> None:
    patch(admin, "webhook.deliver", rate_limit="1/second")
    producer.enqueue("webhook.deliver")
    second = producer.enqueue("webhook.deliver")
    assert worker.claim() is not None
    start = time.monotonic()
    claimed = worker.claim(wait_seconds=20)
    assert claimed is not None and claimed["id"] == second["id"]
    assert time.monotonic() - start < 2.5
