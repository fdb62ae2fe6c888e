"""The job page's "Edit and retry" form (admins) and "Run now" button (its producer, admins):
shown only to those allowed and only when they apply, the API's rules and refusals, CSRF.
On SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest
from flask import Flask

from tests.api.conftest import event_rows, job_row
from tests.api.test_edit_retry import audit_rows
from tests.backends import every_backend  # noqa: F401 (run on both engines)
from tests.web.conftest import Person, Team, soup


def _failed(team: Team, **fields: Any) -> dict[str, Any]:
    job = team.producer.enqueue(max_retries=0, **fields)
    held = team.worker.claim()
    assert held is not None and held["id"] == job["id"]
    assert team.worker.post(f"/jobs/{job['id']}/fail", {"error": "bad address"}).status_code == 200
    return job


def _edit_form(person: Person, job_id: int) -> Any:
    return soup(person.get(f"/ui/jobs/{job_id}")).select_one("#edit-retry form")


def _everything(app: Flask, job_id: int) -> Any:
    return job_row(app, job_id), event_rows(app, job_id), audit_rows(app)


def _edit(**fields: str) -> dict[str, str]:
    return {"payload": '{"to": "new@example.com"}', "priority": "high", "max_retries": "2"} | fields


def test_the_edit_form_is_offered_to_admins_on_failed_jobs_prefilled(team: Team) -> None:
    job = _failed(team, payload={"to": "old@example.com"}, priority="medium")
    boss, prod, work = (team.person(n) for n in ("boss", "prod", "work"))
    form = _edit_form(boss, job["id"])
    assert form is not None and form["hx-post"] == form["action"]
    assert form.find("input", attrs={"name": "csrf_token"})["value"]
    assert "old@example.com" in form.find("textarea", attrs={"name": "payload"}).text
    assert form.select_one("select[name=priority] option[selected]")["value"] == "medium"
    assert form.find("input", attrs={"name": "max_retries"})["value"] == "0"
    for field in form.select("input, select, textarea"):
        if field.get("type") != "hidden":
            assert form.find("label", attrs={"for": field["id"]}) is not None, field
    assert _edit_form(prod, job["id"]) is None
    assert _edit_form(work, job["id"]) is None
    pending = team.producer.enqueue()
    assert _edit_form(boss, pending["id"]) is None


def test_an_admin_edits_and_retries_through_the_form(team: Team) -> None:
    job = _failed(team, payload={"to": "old@example.com"})
    boss = team.person("boss")
    response = boss.post(f"/ui/jobs/{job['id']}/edit-retry", _edit(reason="address fixed"))
    assert response.status_code == 302
    page = soup(boss.get(response.location)).get_text()
    assert "queued again with your changes" in page and "changed payload, priority" in page
    row = job_row(team.app, job["id"])
    assert (row["status"], row["payload"], row["priority"], row["max_retries"]) == (
        "pending",
        {"to": "new@example.com"},
        20,
        2,
    )
    assert audit_rows(team.app)[-1]["details"] == {
        "changed": ["payload", "priority", "max_retries"],
        "reason": "address fixed",
    }


BAD_FORMS = {
    "payload not JSON": (_edit(payload="{to: 1"), "payload", "is not valid JSON"),
    "payload a list": (_edit(payload="[1]"), "payload", "must be a JSON object"),
    "priority unknown": (_edit(priority="urgent"), "priority", "low, medium, high, critical"),
    "max_retries 99": (_edit(max_retries="99"), "max_retries", "from 0 to 25"),
    "max_retries words": (_edit(max_retries="three"), "max_retries", "from 0 to 25"),
    "reason too long": (_edit(reason="x" * 201), "reason", "1-200 characters"),
}


@pytest.mark.parametrize(("form", "name", "says"), BAD_FORMS.values(), ids=BAD_FORMS)
def test_a_refused_edit_shows_its_error_in_the_open_form_and_changes_nothing(
    team: Team, form: dict[str, str], name: str, says: str
) -> None:
    job = _failed(team)
    boss = team.person("boss")
    before = _everything(team.app, job["id"])
    for response in (
        boss.post(f"/ui/jobs/{job['id']}/edit-retry", form),
        boss.hx_post(f"/ui/jobs/{job['id']}/edit-retry", form),
    ):
        assert response.status_code == 422
        page = soup(response)
        assert page.select_one("details#edit-retry").has_attr("open")
        field = page.select_one(f"#edit-retry [name={name}]")
        assert field["aria-invalid"] == "true"
        assert says in page.find(id=f"{field['id']}-error").get_text()
    assert _everything(team.app, job["id"]) == before


@pytest.mark.parametrize("name", ["prod", "prod2", "work"])
def test_only_admins_may_post_the_edit(team: Team, name: str) -> None:
    job = _failed(team)
    person = team.person(name)
    before = _everything(team.app, job["id"])
    assert person.post(f"/ui/jobs/{job['id']}/edit-retry", _edit()).status_code == 403
    assert _everything(team.app, job["id"]) == before


def test_editing_a_job_that_is_not_failed_or_cancelled_says_why(team: Team) -> None:
    job = team.producer.enqueue()
    boss = team.person("boss")
    before = _everything(team.app, job["id"])
    response = boss.hx_post(f"/ui/jobs/{job['id']}/edit-retry", _edit())
    assert "only failed or cancelled jobs can be retried" in response.get_data(as_text=True)
    assert _everything(team.app, job["id"]) == before


def _buttons(person: Person, job_id: int) -> set[str]:
    page = soup(person.get(f"/ui/jobs/{job_id}"))
    return {form["action"].rsplit("/", 1)[1] for form in page.select(".actions form")}


def test_run_now_is_offered_to_its_producer_and_admins_only_when_time_holds_the_job(
    team: Team,
) -> None:
    later = team.producer.enqueue(delay_seconds=3600)
    due = team.producer.enqueue()
    prod, prod2, work, boss = (team.person(n) for n in ("prod", "prod2", "work", "boss"))
    assert "run-now" in _buttons(prod, later["id"]) and "run-now" in _buttons(boss, later["id"])
    assert "run-now" not in _buttons(prod, due["id"]) | _buttons(boss, due["id"])
    assert prod2.get(f"/ui/jobs/{later['id']}").status_code == 404
    parent = team.producer.enqueue(delay_seconds=3600)
    child = team.producer.enqueue(delay_seconds=3600, depends_on=[parent["id"]])
    assert "run-now" not in _buttons(prod, child["id"])  # its parent holds it, not time
    response = prod.hx_post(f"/ui/jobs/{later['id']}/run-now")
    assert response.status_code == 200
    assert f"Job {later['id']} is due now." in response.get_data(as_text=True)
    assert "run-now" not in _buttons(prod, later["id"])
    assert event_rows(team.app, later["id"])[-1]["kind"] == "run_now"
    assert work.post(f"/ui/jobs/{later['id']}/run-now").status_code == 403


def test_run_now_of_another_producers_job_is_404(team: Team) -> None:
    later = team.producer.enqueue(delay_seconds=3600)
    other = team.person("prod2")
    before = _everything(team.app, later["id"])
    assert other.post(f"/ui/jobs/{later['id']}/run-now").status_code == 404
    assert other.post("/ui/jobs/999999/run-now").status_code == 404
    assert _everything(team.app, later["id"]) == before


@pytest.mark.parametrize("route", ["edit-retry", "run-now"])
def test_a_post_without_its_csrf_token_is_refused(team: Team, route: str) -> None:
    job = _failed(team) if route == "edit-retry" else team.producer.enqueue(delay_seconds=3600)
    boss = team.person("boss")
    before = _everything(team.app, job["id"])
    plain = boss.client.post(f"/ui/jobs/{job['id']}/{route}", data=_edit())
    forged = boss.client.post(
        f"/ui/jobs/{job['id']}/{route}",
        data=_edit(),
        headers={"HX-Request": "true", "X-CSRFToken": "forged"},
    )
    for response in (plain, forged):
        assert response.status_code == 400 and "CSRF" in response.get_data(as_text=True)
    assert _everything(team.app, job["id"]) == before
