"""The life of one job through the API, end to end."""

from tests.builders import Api


def test_job_life(producer: Api, worker: Api, admin: Api) -> None:
    job = producer.enqueue(payload={"to": "a@example.com"})
    assert job["status"] == "pending"
    assert "error" not in job
    claimed = worker.claim()
    assert claimed is not None
    assert claimed["id"] == job["id"]
    assert claimed["worker_id"] == "worker"
    assert claimed["attempt"] == 1
    done = worker.post(f"/jobs/{job['id']}/complete", {"result": {"ok": True}, "attempt": 1})
    assert done.status_code == 200
    assert done.get_json()["status"] == "completed"
    assert worker.claim() is None
    events = admin.get(f"/jobs/{job['id']}/events").get_json()["events"]
    assert [e["kind"] for e in events] == ["enqueued", "claimed", "completed"]
