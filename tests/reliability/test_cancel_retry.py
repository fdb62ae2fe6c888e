"""Cancel and retry by role, results on complete, and the event history's visibility."""

from __future__ import annotations

from typing import Any

from tests.backends import every_backend  # noqa: F401 (run on both engines)
from tests.builders import Api


def _fail_for_good(producer: Api, worker: Api) -> dict[str, Any]:
    job = producer.enqueue(max_retries=0)
    assert worker.claim() is not None
    failed = worker.post(f"/jobs/{job['id']}/fail", {"error": "password=hunter2 at /srv/x.py"})
    assert failed.get_json()["status"] == "failed"
    return job


# --- cancel --------------------------------------------------------------------------------


def test_producer_cancels_its_own_pending_job(producer: Api, worker: Api, admin: Api) -> None:
    job = producer.enqueue()
    response = producer.post(f"/jobs/{job['id']}/cancel")
    assert response.status_code == 200
    cancelled = response.get_json()
    assert (cancelled["status"], cancelled["finished_at"] is not None) == ("cancelled", True)
    assert worker.claim() is None
    last = admin.get(f"/jobs/{job['id']}/events").get_json()["events"][-1]
    assert (last["kind"], last["from_status"], last["actor"]) == (
        "cancelled",
        "pending",
        "producer",
    )
    assert producer.post(f"/jobs/{job['id']}/cancel").status_code == 409  # already terminal


def test_producer_cannot_cancel_a_running_job(producer: Api, worker: Api) -> None:
    job = producer.enqueue()
    assert worker.claim() is not None
    response = producer.post(f"/jobs/{job['id']}/cancel")
    assert response.status_code == 409
    assert worker.get(f"/jobs/{job['id']}").get_json()["status"] == "running"


def test_producer_cannot_cancel_another_producers_job(producer: Api, other_producer: Api) -> None:
    job = producer.enqueue()
    assert other_producer.post(f"/jobs/{job['id']}/cancel").status_code == 404
    assert producer.get(f"/jobs/{job['id']}").get_json()["status"] == "pending"


def test_workers_may_not_cancel(producer: Api, worker: Api) -> None:
    job = producer.enqueue()
    assert worker.claim() is not None
    assert worker.post(f"/jobs/{job['id']}/cancel").status_code == 403
    assert worker.get(f"/jobs/{job['id']}").get_json()["status"] == "running"


def test_admin_cancels_a_running_job_and_its_worker_gets_409(
    producer: Api, worker: Api, admin: Api
) -> None:
    job = producer.enqueue()
    assert worker.claim() is not None
    response = admin.post(f"/jobs/{job['id']}/cancel")
    assert response.status_code == 200 and response.get_json()["status"] == "cancelled"
    for action, body in [("complete", {"attempt": 1}), ("heartbeat", {}), ("fail", {"error": "x"})]:
        answer = worker.post(f"/jobs/{job['id']}/{action}", body)
        assert answer.status_code == 409, (action, answer.get_json())
        assert "cancelled" in answer.get_json()["detail"]
    final = admin.get(f"/jobs/{job['id']}").get_json()
    assert (final["status"], final["result"]) == ("cancelled", None)
    kinds = [e["kind"] for e in admin.get(f"/jobs/{job['id']}/events").get_json()["events"]]
    assert kinds == ["enqueued", "claimed", "cancelled"]


def test_admin_cannot_cancel_a_finished_job(producer: Api, worker: Api, admin: Api) -> None:
    job = producer.enqueue()
    assert worker.claim() is not None
    worker.post(f"/jobs/{job['id']}/complete", {})
    assert admin.post(f"/jobs/{job['id']}/cancel").status_code == 409
    assert admin.post("/jobs/999999/cancel").status_code == 404


# --- retry ---------------------------------------------------------------------------------


def test_admin_retries_a_failed_job(producer: Api, worker: Api, admin: Api) -> None:
    job = _fail_for_good(producer, worker)
    response = admin.post(f"/jobs/{job['id']}/retry")
    assert response.status_code == 200, response.get_json()
    retried = response.get_json()
    assert (retried["status"], retried["retry_count"], retried["worker_id"]) == ("pending", 0, None)
    assert retried["finished_at"] is None and retried["lease_expires_at"] is None
    last = admin.get(f"/jobs/{job['id']}/events").get_json()["events"][-1]
    assert (last["kind"], last["from_status"], last["to_status"], last["actor"]) == (
        "retried",
        "failed",
        "pending",
        "admin",
    )
    again = worker.claim()
    assert again is not None and (again["id"], again["attempt"]) == (job["id"], 2)


def test_admin_retries_a_cancelled_job(producer: Api, worker: Api, admin: Api) -> None:
    job = producer.enqueue()
    producer.post(f"/jobs/{job['id']}/cancel")
    retried = admin.post(f"/jobs/{job['id']}/retry").get_json()
    assert (retried["status"], retried["retry_count"]) == ("pending", 0)
    assert worker.claim() is not None


def test_retry_of_unfinished_or_completed_jobs_is_409(
    producer: Api, worker: Api, admin: Api
) -> None:
    pending = producer.enqueue()
    assert admin.post(f"/jobs/{pending['id']}/retry").status_code == 409
    running = worker.claim()
    assert running is not None
    assert admin.post(f"/jobs/{running['id']}/retry").status_code == 409
    worker.post(f"/jobs/{running['id']}/complete", {})
    assert admin.post(f"/jobs/{running['id']}/retry").status_code == 409
    assert admin.post("/jobs/999999/retry").status_code == 404


def test_only_admins_retry(producer: Api, worker: Api) -> None:
    job = _fail_for_good(producer, worker)
    assert producer.post(f"/jobs/{job['id']}/retry").status_code == 403
    assert worker.post(f"/jobs/{job['id']}/retry").status_code == 403
    assert producer.get(f"/jobs/{job['id']}").get_json()["status"] == "failed"


# --- results and history -------------------------------------------------------------------


def test_complete_stores_the_result(producer: Api, worker: Api) -> None:
    job = producer.enqueue()
    assert worker.claim() is not None
    result = {"sent": True, "ids": [1, 2, 3], "nested": {"ok": "ü"}}
    done = worker.post(f"/jobs/{job['id']}/complete", {"result": result, "attempt": 1})
    assert done.status_code == 200 and done.get_json()["result"] == result
    seen = producer.get(f"/jobs/{job['id']}").get_json()
    assert (seen["status"], seen["result"], seen["progress"]) == ("completed", result, 100)


def test_result_must_be_an_object_within_64_kib(producer: Api, worker: Api) -> None:
    job = producer.enqueue()
    assert worker.claim() is not None
    too_big = {"blob": "x" * 65_536}
    for bad in (too_big, [1, 2], "text", 5):
        response = worker.post(f"/jobs/{job['id']}/complete", {"result": bad})
        assert response.status_code == 422, bad
        assert "result" in response.get_json()["errors"]
    assert worker.get(f"/jobs/{job['id']}").get_json()["status"] == "running"
    fits = {"blob": "x" * (65_536 - 20)}
    done = worker.post(f"/jobs/{job['id']}/complete", {"result": fits})
    assert done.status_code == 200, done.get_json()


def test_events_visibility_and_error_texts_only_for_admins(
    producer: Api, other_producer: Api, worker: Api, other_worker: Api, admin: Api
) -> None:
    job = _fail_for_good(producer, worker)
    path = f"/jobs/{job['id']}/events"
    as_admin = admin.get(path).get_json()["events"]
    assert [e["kind"] for e in as_admin] == ["enqueued", "claimed", "failed"]
    assert [e["to_status"] for e in as_admin] == ["pending", "running", "failed"]
    assert [e["attempt"] for e in as_admin] == [None, 1, 1]
    error = as_admin[-1]["error"]
    assert "hunter2" not in error and "/srv/x.py" not in error  # sanitized before storing
    for caller in (producer, worker):
        events = caller.get(path)
        assert events.status_code == 200
        assert all("error" not in e for e in events.get_json()["events"])
        assert "error" not in caller.get(f"/jobs/{job['id']}").get_json()
    assert other_producer.get(path).status_code == 404
    assert other_worker.get(path).status_code == 404
    assert admin.get("/jobs/999999/events").status_code == 404
