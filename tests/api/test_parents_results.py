"""Parents' results: a claimed job with ``depends_on`` carries what its parents returned, in the
claim's answer and in the finish-and-claim answer; never their payloads or errors, and nothing
for a job without parents (on both engines)."""

from __future__ import annotations

from typing import Any

from tests.api.test_attacks_finish_claim import _in_background
from tests.builders import Api


def _complete(worker: Api, job: dict[str, Any], result: dict[str, Any]) -> Any:
    item = {"id": job["id"], "attempt": job["attempt"], "outcome": "completed", "result": result}
    return worker.post("/jobs/finish", {"results": [item]})


def test_a_claimed_dependent_carries_its_parents_results_in_depends_on_order(
    producer: Api, worker: Api, admin: Api
) -> None:
    first = producer.enqueue(payload={"card": "4111-secret"})
    second = producer.enqueue("report.build", max_retries=0)
    for result in ({"total": 42}, None):
        held = worker.claim()
        assert held is not None
        if result is None:  # the second parent fails for good: its error stays unseen
            item = {"id": held["id"], "attempt": 1, "outcome": "failed", "error": "db down"}
            assert worker.post("/jobs/finish", {"results": [item]}).status_code == 200
        else:
            assert _complete(worker, held, result).status_code == 200
    child = producer.enqueue(
        depends_on=[second["id"], first["id"]], on_dependency_failure="run", payload={"k": 1}
    )
    claimed = worker.claim()
    assert claimed is not None and claimed["id"] == child["id"]
    assert claimed["parents"] == [
        {"id": second["id"], "type": "report.build", "status": "failed", "result": None},
        {"id": first["id"], "type": "email.send", "status": "completed", "result": {"total": 42}},
    ]
    assert "4111-secret" not in str(claimed) and "db down" not in str(claimed)
    # Only the claim's answer carries them: reading the job later does not.
    assert "parents" not in admin.get(f"/jobs/{child['id']}").get_json()


def test_a_job_without_parents_has_no_parents_field(producer: Api, worker: Api) -> None:
    producer.enqueue()
    claimed = worker.post("/jobs/claim", {"max_jobs": 5}).get_json()["jobs"]
    assert len(claimed) == 1 and "parents" not in claimed[0]


def test_finish_and_claim_hands_the_next_step_what_this_one_returned(
    producer: Api, worker: Api
) -> None:
    parent = producer.enqueue()
    child = producer.enqueue(depends_on=[parent["id"]])
    held = worker.claim()
    assert held is not None and held["id"] == parent["id"]
    item = {"id": parent["id"], "attempt": 1, "outcome": "completed", "result": {"rows": 7}}
    answer = worker.post("/jobs/finish", {"results": [item], "claim": {"max_jobs": 2}})
    assert answer.status_code == 200
    (next_job,) = answer.get_json()["jobs"]
    assert next_job["id"] == child["id"]
    assert next_job["parents"] == [
        {"id": parent["id"], "type": "email.send", "status": "completed", "result": {"rows": 7}}
    ]


def test_a_waiting_claim_served_by_the_dispatcher_carries_them_too(
    producer: Api, worker: Api
) -> None:
    parent = producer.enqueue()
    producer.enqueue(depends_on=[parent["id"]])
    held = worker.claim()
    assert held is not None
    waiting = _in_background(
        lambda: worker.post("/jobs/claim", {"max_jobs": 1, "wait_seconds": 10})
    )
    assert _complete(worker, held, {"ok": True}).status_code == 200
    (claimed,) = waiting().get_json()["jobs"]
    assert claimed["parents"][0]["result"] == {"ok": True}
