"""An API request is one transaction: the token is checked in the transaction of the work, the
caller's 401 or 403 beats any other answer, and the session machinery never runs."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import event, select, update

from app.accounts import service as accounts
from app.extensions import login_manager
from app.infra import db
from app.queue.vocabulary.timeutil import utcnow
from app.storage.schema import api_tokens, jobs
from devservers.accounts import AS_OPERATOR
from tests.api.conftest import assert_problem, snapshot
from tests.api.waiting import waits
from tests.builders import PASSWORD, Api, make_api, make_user


@contextmanager
def transactions(app: Flask) -> Iterator[list[list[str]]]:
    """The SQL of each transaction the app's engine begins in the block, in order."""
    begun: list[list[str]] = []

    def begin(_conn: Any) -> None:
        begun.append([])

    def statement(_conn: Any, _cursor: Any, sql: str, *_: Any) -> None:
        if begun:
            begun[-1].append(sql)

    engine = db.engine(app)
    event.listen(engine, "begin", begin)
    event.listen(engine, "before_cursor_execute", statement)
    try:
        yield begun
    finally:
        event.remove(engine, "begin", begin)
        event.remove(engine, "before_cursor_execute", statement)


def _first_use_recorded(app: Flask, *callers: Api) -> None:
    """Every caller's token was used just now, so no request below has a use to record."""
    with app.app_context(), db.transaction() as conn:
        conn.execute(update(api_tokens).values(last_used_at=utcnow()))
    assert all(caller.token for caller in callers)


def test_each_call_of_a_job_life_is_one_transaction_that_checks_the_token_first(
    app: Flask, producer: Api, worker: Api, admin: Api
) -> None:
    assert worker.claim() is None  # this process's schedule tick, out of the way
    _first_use_recorded(app, producer, worker, admin)
    calls = [
        (producer, "POST", "/jobs", {"type": "email.send"}),
        (producer, "GET", "/jobs/1", None),
        (producer, "GET", "/jobs", None),
        (producer, "GET", "/jobs/1/events", None),
        (worker, "POST", "/jobs/claim", None),
        (worker, "POST", "/jobs/1/heartbeat", {"progress": 5, "attempt": 1}),
        (worker, "POST", "/jobs/1/fail", {"error": "boom", "attempt": 1, "retry_in": 0}),
        (worker, "POST", "/jobs/claim", None),
        (worker, "POST", "/jobs/1/release", {"attempt": 2}),
        (worker, "POST", "/jobs/claim", None),
        (worker, "POST", "/jobs/1/complete", {"attempt": 3}),
        (producer, "POST", "/jobs", {"type": "email.send"}),
        (admin, "POST", "/jobs/2/cancel", None),
        (admin, "POST", "/jobs/2/retry", None),
    ]
    for caller, method, path, body in calls:
        with transactions(app) as begun:
            response = caller.get(path) if method == "GET" else caller.post(path, body)
        assert response.status_code in (200, 201), (path, response.get_json())
        assert len(begun) == 1, (method, path, begun)
        assert "api_tokens" in begun[0][0], (path, begun[0][:1])  # the lookup comes first


def test_a_read_whose_token_use_is_due_records_it_in_a_second_short_transaction(
    app: Flask, producer: Api
) -> None:
    producer.enqueue()
    with app.app_context(), db.transaction() as conn:
        conn.execute(update(api_tokens).values(last_used_at=utcnow() - timedelta(minutes=5)))
    with transactions(app) as begun:
        assert producer.get("/jobs").status_code == 200
    assert len(begun) == 2
    assert any(sql.startswith("UPDATE api_tokens") for sql in begun[1]), begun[1]
    with app.app_context(), db.read() as conn:
        used = conn.execute(select(api_tokens.c.last_used_at)).scalar_one()
    assert used > utcnow() - timedelta(minutes=1)


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (b"{not json", "application/json"),
        (b'{"type": "email.send", "type": "x"}', "application/json"),
        (b'{"type": "email.send"}', "text/plain"),
        (b'{"type": "no.such.type", "surprise": 1}', "application/json"),
    ],
)
def test_the_callers_401_or_403_beats_what_is_wrong_with_the_body(
    app: Flask, client: FlaskClient, producer: Api, worker: Api, body: bytes, content_type: str
) -> None:
    before = snapshot(app)
    unknown = Api(client, "ql_" + "A" * 43)
    for caller, status in ((unknown, 401), (worker, 403)):
        response = caller.post("/jobs", data=body, headers={"Content-Type": content_type})
        assert_problem(response, status)
    assert producer.post(
        "/jobs", data=body, headers={"Content-Type": content_type}
    ).status_code in (
        400,
        415,
        422,
    )
    assert snapshot(app) == before


def test_a_signed_in_browser_session_is_never_loaded_for_the_api(
    app: Flask, client: FlaskClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_user(app, "person", "producer", password=PASSWORD)
    caller = make_api(app, client, "machine", "producer")
    login = client.get("/login")
    assert login.status_code == 200
    loads: list[str] = []
    real = login_manager._user_callback
    assert real is not None

    def counting(value: str) -> Any:
        loads.append(value)
        return real(value)

    monkeypatch.setattr(login_manager, "_user_callback", counting)
    from tests.web.conftest import login as sign_in

    assert sign_in(client, "person").status_code == 302
    assert client.get("/ui/").status_code == 200  # the session works for pages
    loads.clear()
    assert caller.get("/jobs").status_code == 200  # the same client, its cookie sent along
    assert caller.post("/jobs", {"type": "email.send"}).status_code == 201
    assert loads == []


def test_a_long_poll_checks_the_token_again_on_each_try(app: Flask, client: FlaskClient) -> None:
    waiter = make_api(app, client, "waiter", "worker")
    producer = make_api(app, app.test_client(), "maker", "producer")
    answers: list[Any] = []
    polling = threading.Thread(
        target=lambda: answers.append(
            Api(app.test_client(), waiter.token).post("/jobs/claim", {"wait_seconds": 10})
        )
    )
    before = waits()
    polling.start()
    try:
        deadline = time.monotonic() + 10
        while waits() == before:  # the claim found nothing and waits: its next try is
            assert time.monotonic() < deadline  # the dispatcher's, which must check again
            time.sleep(0.01)
        with app.app_context(), db.transaction() as conn:
            [(token, _)] = accounts.list_tokens(conn, accounts.OPERATOR, "waiter")
            accounts.revoke_token(
                conn,
                accounts.OPERATOR,
                token.id,
                now=utcnow(),
                origin=AS_OPERATOR,
            )
        job = producer.enqueue()  # wakes the waiting claim, whose next try finds the revocation
    finally:
        polling.join(timeout=15)
    assert not polling.is_alive()
    assert_problem(answers[0], 401)
    with app.app_context(), db.read() as conn:
        status = conn.execute(select(jobs.c.status).where(jobs.c.id == job["id"])).scalar_one()
    assert status == "pending"
