"""Plain builder functions with defaults: users, tokens, jobs, and a JSON API client."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import Connection
from werkzeug.test import TestResponse

from app.queue.contract.job_requests import EnqueueBody
from app.queue.rules.settings import QueueSettings
from app.queue.usecases import enqueueing
from app.queue.vocabulary.actors import Actor
from app.queue.vocabulary.jobs import Job
from app.queue.vocabulary.timeutil import utcnow
from devservers.accounts import make_token as make_token
from devservers.accounts import make_user as make_user

PASSWORD = "correct horse battery staple"


def make_job(
    conn: Connection,
    actor: Actor,
    settings: QueueSettings,
    *,
    now: datetime | None = None,
    **fields: Any,
) -> Job:
    """Enqueue a job through the service (fields as in a ``POST /jobs`` body); asserts it is new.
    The one job builder of the service-level suites (the API suites use ``Api.enqueue``)."""
    request = EnqueueBody.parse({"type": "email.send", **fields}, settings).to_request()
    job, created = enqueueing.enqueue(conn, actor, request, now=now or utcnow()).value
    assert created, job
    return job


def job_value(**fields: Any) -> Job:
    """A ``Job`` value as the store would return it (pending, never claimed), for pure tests."""
    at = datetime(2030, 1, 1, tzinfo=UTC)
    defaults: dict[str, Any] = {name: None for name in Job.__dataclass_fields__}
    defaults |= {"id": 1, "type": "email.send", "payload": {}, "priority": 10, "status": "pending"}
    defaults |= {"retry_count": 0, "max_retries": 3, "attempts": 0, "created_by": 1}
    defaults |= {"run_at": at, "created_at": at, "updated_at": at}
    return Job(**(defaults | fields))


@dataclass
class Api:
    """A JSON API caller holding one bearer token."""

    client: FlaskClient
    token: str | None

    def headers(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        return headers | (extra or {})

    def get(self, path: str, **kwargs: Any) -> TestResponse:
        return self.client.get(path, headers=self.headers(kwargs.pop("headers", None)), **kwargs)

    def post(self, path: str, json: Any = None, **kwargs: Any) -> TestResponse:
        headers = self.headers(kwargs.pop("headers", None))
        if json is not None:
            return self.client.post(path, json=json, headers=headers, **kwargs)
        return self.client.post(path, headers=headers, **kwargs)

    def enqueue(self, job_type: str = "email.send", **fields: Any) -> dict[str, Any]:
        """Enqueue a job and return its JSON (asserting it was created)."""
        response = self.post("/jobs", {"type": job_type, **fields})
        assert response.status_code == 201, response.get_json()
        return response.get_json()  # type: ignore[no-any-return]

    def claim(self, **fields: Any) -> dict[str, Any] | None:
        """Claim the next job (None on 204)."""
        response = self.post("/jobs/claim", fields or None)
        assert response.status_code in (200, 204), response.get_json()
        return response.get_json() if response.status_code == 200 else None


def make_api(app: Flask, client: FlaskClient, name: str, role: str, **user: Any) -> Api:
    """A user with a token, wrapped in an ``Api`` caller."""
    make_user(app, name, role, **user)
    return Api(client, make_token(app, name))
