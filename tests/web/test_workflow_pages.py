"""The workflow on the pages: a job's parents, dependents and group, the group page with its
live progress bar, parents named on the enqueue form, waiting jobs on the dashboard."""

from __future__ import annotations

from typing import Any

from flask import Flask

from app.accounts import service as accounts
from app.accounts.service import OPERATOR
from app.infra import db
from app.queue.vocabulary.timeutil import utcnow
from devservers.accounts import AS_OPERATOR
from tests.web.conftest import Team, soup
from tests.web.test_forms import enqueue_form


def _group(team: Team, count: int = 2) -> dict[str, Any]:
    body = {"jobs": [{"type": "email.send"}] * count, "group": {"name": "nightly"}}
    answer = team.producer.post("/jobs/batch", body).get_json()
    return answer  # type: ignore[no-any-return]


def test_the_job_page_lists_parents_dependents_and_group(team: Team) -> None:
    answer = _group(team)
    parent = answer["jobs"][0]
    child = team.producer.enqueue(depends_on=[parent["id"]])
    person = team.person("prod")
    page = soup(person.get(f"/ui/jobs/{child['id']}"))
    assert [a["href"] for a in page.select("#job-parents a")] == [f"/ui/jobs/{parent['id']}"]
    assert page.select_one("#job-parents .badge").get_text(strip=True) == "pending"
    assert "waiting for dependencies" in page.select_one(".reasons").get_text()
    parent_page = soup(person.get(f"/ui/jobs/{parent['id']}"))
    assert [a["href"] for a in parent_page.select("#job-dependents a")] == [
        f"/ui/jobs/{child['id']}"
    ]
    link = parent_page.select_one("#job-group a")
    assert link["href"] == f"/ui/groups/{answer['group_id']}"


def test_the_group_page_shows_progress_and_stops_polling_when_finished(team: Team) -> None:
    answer = _group(team)
    group_id = answer["group_id"]
    person = team.person("prod")
    page = soup(person.get(f"/ui/groups/{group_id}"))
    bar = page.select_one("progress#group-bar")
    assert (bar["value"], bar["max"]) == ("0", "2")
    assert page.select_one("#group-progress")["hx-trigger"].startswith("every")
    for _ in range(2):
        job = team.worker.claim()
        assert job is not None
        team.worker.post(f"/jobs/{job['id']}/complete", {"attempt": job["attempt"]})
    live = person.htmx(f"/ui/groups/{group_id}")
    assert live.status_code == 286  # htmx stops polling: the group has finished
    assert soup(live).select_one("progress#group-bar")["value"] == "2"
    assert team.person("prod2").get(f"/ui/groups/{group_id}").status_code == 404


def test_the_enqueue_form_names_parents(team: Team) -> None:
    parent = team.producer.enqueue()
    person = team.person("prod")
    response = person.post("/ui/jobs/new", enqueue_form(depends_on=f"{parent['id']}"))
    assert response.status_code == 302
    child_id = int(response.headers["Location"].rsplit("/", 1)[1])
    assert team.producer.get(f"/jobs/{child_id}").get_json()["waiting_for"] == [parent["id"]]
    refused = person.post("/ui/jobs/new", enqueue_form(depends_on="12, x"))
    assert refused.status_code == 422
    assert "must be job ids" in refused.get_data(as_text=True)


def test_the_dashboard_counts_waiting_jobs_apart(team: Team) -> None:
    parent = team.producer.enqueue()
    team.producer.enqueue(depends_on=[parent["id"]])
    text = soup(team.person("prod").get("/ui/")).select_one("#waiting-count").get_text()
    assert "Of the 2 pending, 1 waits for parent jobs and 1 is due or scheduled." in text


def test_the_group_page_says_why_a_callback_was_refused(app: Flask, team: Team) -> None:
    callbacks = {"on_complete": {"type": "email.send", "priority": "medium"}}
    body = {"jobs": [{"type": "email.send"}], "group": {"name": "nightly", **callbacks}}
    group_id = team.producer.post("/jobs/batch", body).get_json()["group_id"]
    with app.app_context(), db.transaction() as conn:
        accounts.update_user(
            conn,
            OPERATOR,
            "prod",
            role="producer",
            max_priority="low",
            now=utcnow(),
            origin=AS_OPERATOR,
        )
    job = team.worker.claim()
    assert job is not None
    team.worker.post(f"/jobs/{job['id']}/complete", {"attempt": job["attempt"]})
    page = soup(team.person("prod").get(f"/ui/groups/{group_id}"))
    refused = page.select_one("#group-on_complete").get_text(" ", strip=True)
    assert refused == "refused: priority medium is above the producer's cap (low)"
    assert page.select_one("#group-on_success").get_text(strip=True) == "none yet"
