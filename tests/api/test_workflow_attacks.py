"""An attack pass over children, dependencies and groups, with a worker's or a producer's token:
each case tries to reach past its lane (another job's keys, parents or answers, more children
than allowed, a callback its producer may no longer enqueue). Cases that already held are kept as
regression tests."""

from __future__ import annotations

import http.client
import json
import threading
from datetime import UTC, datetime
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from app.accounts import service as accounts
from app.accounts.service import OPERATOR
from app.infra import db
from app.queue.rules import workflows
from app.queue.sql import jobs as jobs_sql
from app.queue.vocabulary.errors import InvalidInput
from app.queue.vocabulary.jobs import EnqueueRequest
from app.queue.vocabulary.timeutil import utcnow
from devservers.accounts import AS_OPERATOR
from tests.api.conftest import LiveServer, assert_problem, finish, job_count, snapshot
from tests.builders import Api, make_api, make_token


def _held(producer: Api, worker: Api, job_type: str = "report.build") -> dict[str, Any]:
    """A job of ``producer``'s, of its own type so a typed claim finds it, held by ``worker``."""
    producer.enqueue(job_type)
    claimed = worker.claim(types=[job_type])
    assert claimed is not None
    return claimed


def _spawn(worker: Api, parent: dict[str, Any], jobs: list[dict[str, Any]]) -> Any:
    return worker.post(
        f"/jobs/{parent['id']}/children", {"attempt": parent["attempt"], "jobs": jobs}
    )


# A worker's token.


def test_a_grandchild_cannot_wait_for_its_grandparent(
    app: Flask, producer: Api, worker: Api
) -> None:
    grandparent = _held(producer, worker)
    (child,) = _spawn(worker, grandparent, [{"type": "webhook.deliver"}]).get_json()["jobs"]
    held = worker.claim(types=["webhook.deliver"])
    assert held is not None and held["id"] == child["id"]
    before = snapshot(app)
    response = _spawn(worker, held, [{"type": "email.send", "depends_on": [grandparent["id"]]}])
    assert assert_problem(response, 422)["errors"] == {
        "jobs[0].depends_on": f"job {grandparent['id']} does not exist"
    }
    assert snapshot(app) == before


@pytest.mark.parametrize(
    "named",
    [(["first"], []), ([], ["first"]), (["second"], ["first"])],
    ids=["itself", "an-earlier-sibling", "a-cycle"],
)
def test_children_of_one_request_cannot_name_each_other_by_guessed_ids(
    app: Flask, producer: Api, worker: Api, named: tuple[list[str], list[str]]
) -> None:
    parent = _held(producer, worker)
    ids = {"first": parent["id"] + 1, "second": parent["id"] + 2}  # the ids they would get
    items = [{"type": "email.send", "depends_on": [ids[n] for n in names]} for names in named]
    before = snapshot(app)
    body = assert_problem(_spawn(worker, parent, items), 422)
    assert all(text.endswith("does not exist") for text in body["errors"].values())
    assert snapshot(app) == before


def test_the_children_body_forms_no_group_and_names_no_items(
    app: Flask, producer: Api, worker: Api
) -> None:
    parent = _held(producer, worker)
    before = snapshot(app)
    for extra in ({"after_items": [0]}, {"group": {"name": "g"}}, {"parent_id": 1}):
        body = assert_problem(_spawn(worker, parent, [{"type": "email.send", **extra}]), 422)
        assert list(body["errors"]) == [f"jobs[0].{next(iter(extra))}"]
    grouped = worker.post(
        f"/jobs/{parent['id']}/children",
        {"attempt": parent["attempt"], "jobs": [{"type": "email.send"}], "group": {"name": "g"}},
    )
    assert assert_problem(grouped, 422)["errors"].keys() == {"group"}
    assert snapshot(app) == before


def test_a_unique_keys_duplicate_shows_no_other_workers_run(
    app: Flask, client: FlaskClient, producer: Api, worker: Api
) -> None:
    runner = make_api(app, client, "runner-7", "worker")
    parent = _held(producer, worker)
    item = {"type": "email.send", "unique_key": "step-2", "payload": {"v": 1}}
    (made,) = _spawn(worker, parent, [item]).get_json()["jobs"]
    held = runner.claim(types=["email.send"])
    assert held is not None and held["id"] == made["id"]
    beat = {"attempt": held["attempt"], "progress": 40, "message": "runner-7 at row 4000"}
    assert runner.post(f"/jobs/{held['id']}/heartbeat", beat).status_code == 200
    again = _spawn(worker, parent, [{**item, "payload": {"v": 2}}])
    assert again.status_code == 200 and again.get_json()["created"] == [False]
    (shown,) = again.get_json()["jobs"]
    assert shown["duplicate"] is True and shown["id"] == made["id"]
    assert (shown["status"], shown["attempt"], shown["worker_id"]) == ("pending", 0, None)
    assert (shown["progress"], shown["progress_message"], shown["claimed_at"]) == (None,) * 3
    assert "runner-7" not in again.get_data(as_text=True)


def test_a_replayed_child_shows_its_secret_names_only(
    producer: Api, worker: Api, other_worker: Api
) -> None:
    parent = _held(producer, worker)
    item = {"type": "email.send", "idempotency_key": "c", "secrets": {"token": "s3cr3t-child"}}
    first = _spawn(worker, parent, [item])
    assert first.status_code == 201
    assert worker.post(f"/jobs/{parent['id']}/release", {"attempt": 1}).status_code == 200
    again = other_worker.claim(types=["report.build"])
    assert again is not None
    replay = _spawn(other_worker, again, [item])
    assert replay.status_code == 200
    for answer in (first, replay):
        (child,) = answer.get_json()["jobs"]
        assert child["secret_names"] == ["token"] and "secrets" not in child
        assert "s3cr3t-child" not in answer.get_data(as_text=True)


def test_a_demoted_producers_held_job_spawns_nothing(
    app: Flask, producer: Api, worker: Api
) -> None:
    parent = _held(producer, worker)
    with app.app_context(), db.transaction() as conn:
        accounts.update_user(
            conn,
            OPERATOR,
            "producer",
            role="worker",
            max_priority="low",
            now=utcnow(),
            origin=AS_OPERATOR,
        )
    before = snapshot(app)
    assert_problem(_spawn(worker, parent, [{"type": "email.send"}]), 403)
    assert snapshot(app) == before


class TestSpawningAtOnce:
    """Requests spawning children of one job at the same time cannot pass its limit together:
    the parent stays locked from the holder's check to the count."""

    @pytest.fixture
    def app_config(self) -> dict[str, Any]:
        return {"MAX_CHILDREN_PER_JOB": 3}

    def test_concurrent_spawns_stop_at_the_limit(
        self, app: Flask, producer: Api, worker: Api, live_server: LiveServer
    ) -> None:
        parent = _held(producer, worker)
        token = make_token(app, "worker")
        senders = 6
        barrier = threading.Barrier(senders)
        statuses: list[int] = []
        lock = threading.Lock()

        def send() -> None:
            barrier.wait(timeout=30)
            conn = http.client.HTTPConnection(live_server.host, live_server.port, timeout=30)
            body = {"attempt": parent["attempt"], "jobs": [{"type": "email.send"}]}
            headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
            try:
                conn.request("POST", f"/jobs/{parent['id']}/children", json.dumps(body), headers)
                status = conn.getresponse().status
            finally:
                conn.close()
            with lock:
                statuses.append(status)

        threads = [threading.Thread(target=send) for _ in range(senders)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert sorted(statuses) == [201] * 3 + [422] * 3
        assert job_count(app) == 4  # the parent and three children


# A producer's token.


def test_parent_ids_at_the_edges_are_refused_as_missing(app: Flask, producer: Api) -> None:
    before = snapshot(app)
    for ids, status in (([2**63 - 1], 422), ([2**63], 422), ([0], 422), ([-1], 422)):
        response = producer.post("/jobs", {"type": "email.send", "depends_on": ids})
        assert_problem(response, status)
    assert snapshot(app) == before


def test_a_demoted_producers_callback_is_refused(
    app: Flask, producer: Api, worker: Api, admin: Api
) -> None:
    body = {
        "jobs": [{"type": "report.build"}],
        "group": {"name": "g", "on_success": {"type": "email.send"}},
    }
    group_id = producer.post("/jobs/batch", body).get_json()["group_id"]
    with app.app_context(), db.transaction() as conn:
        accounts.update_user(
            conn,
            OPERATOR,
            "producer",
            role="worker",
            max_priority="low",
            now=utcnow(),
            origin=AS_OPERATOR,
        )
    count = job_count(app)
    finish(worker, worker.claim() or {})
    assert job_count(app) == count
    refused = admin.get(f"/groups/{group_id}").get_json()["callbacks_refused"]
    assert refused == {"on_success": "the group's producer may no longer enqueue jobs"}


def test_a_refused_callback_stays_refused_when_the_group_finishes_again(
    app: Flask, producer: Api, worker: Api, admin: Api
) -> None:
    callback = {"type": "email.send"}
    body = {
        "jobs": [{"type": "report.build", "max_retries": 0}],
        "group": {"name": "g", "on_complete": callback},
    }
    group_id = producer.post("/jobs/batch", body).get_json()["group_id"]
    with app.app_context(), db.transaction() as conn:
        accounts.set_disabled(
            conn, OPERATOR, "producer", disabled=True, now=utcnow(), origin=AS_OPERATOR
        )
    member = worker.claim()
    assert member is not None
    finish(worker, member, "failed")
    with app.app_context(), db.transaction() as conn:
        accounts.set_disabled(
            conn, OPERATOR, "producer", disabled=False, now=utcnow(), origin=AS_OPERATOR
        )
    assert admin.post(f"/jobs/{member['id']}/retry").status_code == 200
    finish(worker, worker.claim() or {})  # the group finishes a second time
    shown = admin.get(f"/groups/{group_id}").get_json()
    assert shown["callbacks"]["on_complete"] is None  # decided once, when it first finished
    assert list(shown["callbacks_refused"]) == ["on_complete"]
    audit = admin.get("/audit?action=group_callback_refused").get_json()["events"]
    assert len(audit) == 1


def test_a_producer_enabled_again_before_the_group_finishes_gets_its_callback(
    app: Flask, producer: Api, worker: Api
) -> None:
    body = {
        "jobs": [{"type": "report.build"}],
        "group": {"name": "g", "on_complete": {"type": "email.send"}},
    }
    group_id = producer.post("/jobs/batch", body).get_json()["group_id"]
    for disabled in (True, False):
        with app.app_context(), db.transaction() as conn:
            accounts.set_disabled(
                conn,
                OPERATOR,
                "producer",
                disabled=disabled,
                now=utcnow(),
                origin=AS_OPERATOR,
            )
    finish(worker, worker.claim() or {})
    shown = producer.get(f"/groups/{group_id}").get_json()
    assert shown["callbacks"]["on_complete"] is not None and shown["callbacks_refused"] == {}


# Robustness.


def test_a_parent_gone_since_it_was_read_is_refused_as_missing(app: Flask, producer: Api) -> None:
    parent, child = producer.enqueue(), producer.enqueue()
    gone = 10**9  # as if read before the request and deleted (pruned) since
    request = EnqueueRequest(
        type="email.send",
        payload={},
        priority=0,
        max_retries=3,
        idempotency_key=None,
        run_at=None,
        delay_seconds=None,
        fingerprint=None,
        depends_on=(parent["id"], gone),
    )
    with app.app_context(), db.transaction() as conn:
        job = jobs_sql.get_job(conn, child["id"])
        assert job is not None
        added = [workflows.Added(job, request)]
        with pytest.raises(InvalidInput, match=f"job {gone} does not exist"):
            workflows.link(conn, added, [], {parent["id"], gone}, now=datetime.now(UTC))
