"""Enqueue, cancel and retry from the pages, and the admin forms (fresh login for roles)."""

from __future__ import annotations

from typing import Any

import pytest
from flask import Flask

from app.queue.vocabulary.job_fields import IDEMPOTENCY_KEY, MAX_RETRIES, TIMESTAMP_LENGTH
from tests.backends import every_backend  # noqa: F401 (NUL and overflow differ per engine)
from tests.builders import Api
from tests.web.conftest import Person, Team, soup


def enqueue_form(**fields: Any) -> dict[str, Any]:
    return {"type": "email.send", "payload": "{}", "priority": "low", "max_retries": "3"} | fields


def test_enqueue_form_offers_only_allowed_types_and_priorities(team: Team) -> None:
    page = soup(team.person("prod").get("/ui/jobs/new"))
    types = [o["value"] for o in page.select("select[name=type] option")]
    priorities = [o["value"] for o in page.select("select[name=priority] option")]
    assert types == team.app.config["JOB_TYPES"]
    assert priorities == ["low", "medium"]
    for field in page.select("form.enqueue input, form.enqueue select, form.enqueue textarea"):
        if field.get("type") != "hidden":
            assert page.find("label", attrs={"for": field["id"]}) is not None, field


def test_enqueue_creates_the_job_and_shows_it(team: Team) -> None:
    person = team.person("prod")
    form = enqueue_form(
        payload='{"to": "ada@example.com", "n": 2}',
        priority="medium",
        max_retries="5",
        idempotency_key="welcome-ada",
        run_at="2030-01-02T03:04",
    )
    response = person.post("/ui/jobs/new", form)
    assert response.status_code == 302
    page = person.get(response.location)
    text = soup(page).get_text()
    assert "enqueued" in text and "welcome-ada" in text and "2030-01-02 03:04:00 UTC" in text
    job = team.producer.get(response.location.replace("/ui", "")).get_json()
    assert job["payload"] == {"to": "ada@example.com", "n": 2}
    assert (job["priority"], job["max_retries"]) == ("medium", 5)
    again = person.post("/ui/jobs/new", form)
    assert again.location == response.location


def _field_error(response: Any, name: str) -> str:
    field = soup(response).find(attrs={"name": name})
    error = soup(response).find(id=f"{field['id']}-error")
    assert error is not None, name
    assert field["aria-invalid"] == "true"
    return str(error.get_text())


def test_payload_that_is_not_an_object_gets_a_clear_message(team: Team) -> None:
    person = team.person("prod")
    for text in ("[1, 2]", '"hello"', "42"):
        response = person.post("/ui/jobs/new", enqueue_form(payload=text))
        assert response.status_code == 422
        assert "must be a JSON object" in _field_error(response, "payload")
    broken = person.post("/ui/jobs/new", enqueue_form(payload='{"a": 1,'))
    assert "is not valid JSON" in _field_error(broken, "payload")
    duplicate = person.post("/ui/jobs/new", enqueue_form(payload='{"a": 1, "a": 2}'))
    assert "duplicate key" in _field_error(duplicate, "payload")
    nan = person.post("/ui/jobs/new", enqueue_form(payload='{"a": NaN}'))
    assert nan.status_code == 422
    deep = person.post("/ui/jobs/new", enqueue_form(payload="[" * 5000 + "]" * 5000))
    assert deep.status_code == 422
    assert team.producer.get("/jobs").get_json()["jobs"] == []


def test_bad_fields_come_back_per_field(team: Team) -> None:
    person = team.person("prod")
    response = person.post(
        "/ui/jobs/new",
        enqueue_form(type="rm.rf", idempotency_key="has space", run_at="tomorrow"),
    )
    assert response.status_code == 422
    assert "not an allowed job type" in _field_error(response, "type")
    assert "printable ASCII" in _field_error(response, "idempotency_key")
    assert _field_error(response, "run_at") == "must be a 24-hour UTC time like 2030-01-02 15:04"
    retries = person.post("/ui/jobs/new", enqueue_form(max_retries="99"))
    assert retries.status_code == 422


@pytest.mark.parametrize("typed", ["99", "-1", "three", ""])
def test_the_page_refuses_max_retries_once_in_the_apis_words(team: Team, typed: str) -> None:
    """The form validates nothing itself: what the page refuses is what the request model
    refuses, worded as the API words it, whatever was typed."""
    response = team.person("prod").post("/ui/jobs/new", enqueue_form(max_retries=typed))
    assert response.status_code == 422
    api = team.producer.post("/jobs", {"type": "email.send", "max_retries": 99})
    assert _field_error(response, "max_retries") == api.get_json()["errors"]["max_retries"]
    assert team.producer.get("/jobs").get_json()["jobs"] == []


def test_the_page_shows_the_limits_the_fields_are_declared_with(team: Team) -> None:
    page = soup(team.person("prod").get("/ui/jobs/new"))
    retries = page.find("input", attrs={"name": "max_retries"})
    assert (retries["type"], retries["min"], retries["max"], retries["value"]) == (
        "number",
        str(MAX_RETRIES.low),
        str(MAX_RETRIES.high),
        str(MAX_RETRIES.default),
    )
    assert page.find(id=f"{retries['id']}-hint").get_text() == MAX_RETRIES.hint
    key = page.find("input", attrs={"name": "idempotency_key"})
    assert key["maxlength"] == str(IDEMPOTENCY_KEY.length)
    assert page.find("input", attrs={"name": "run_at"})["maxlength"] == str(TIMESTAMP_LENGTH)


def test_forged_critical_priority_from_a_producer_is_refused(team: Team) -> None:
    person = team.person("prod")
    for label in ("critical", "high"):
        response = person.post("/ui/jobs/new", enqueue_form(priority=label))
        assert response.status_code == 403
        assert "above your cap" in _field_error(response, "priority")
    assert team.producer.get("/jobs").get_json()["jobs"] == []


def test_admin_may_enqueue_critical(team: Team) -> None:
    response = team.person("boss").post("/ui/jobs/new", enqueue_form(priority="critical"))
    assert response.status_code == 302


def test_worker_cannot_enqueue(team: Team) -> None:
    assert team.person("work").post("/ui/jobs/new", enqueue_form()).status_code == 403


def _actions(person: Person, job_id: int) -> dict[str, Any]:
    page = soup(person.get(f"/ui/jobs/{job_id}"))
    return {form["action"].rsplit("/", 1)[1]: form for form in page.select(".actions form")}


def test_cancel_and_retry_buttons_follow_the_role_table(team: Team) -> None:
    pending = team.producer.enqueue()
    prod, prod2, work, boss = (team.person(n) for n in ("prod", "prod2", "work", "boss"))
    assert set(_actions(prod, pending["id"])) == {"cancel"}
    assert set(_actions(boss, pending["id"])) == {"cancel"}
    form = _actions(prod, pending["id"])["cancel"]
    assert form["method"] == "post" and form["hx-confirm"]
    assert form.find("input", attrs={"name": "csrf_token"})["value"]
    assert prod2.post(f"/ui/jobs/{pending['id']}/cancel").status_code == 404
    assert work.post(f"/ui/jobs/{pending['id']}/cancel").status_code == 403
    response = prod.post(f"/ui/jobs/{pending['id']}/cancel")
    assert response.status_code == 302
    assert "cancelled" in soup(prod.get(response.location)).get_text()
    assert set(_actions(prod, pending["id"])) == set()
    assert set(_actions(boss, pending["id"])) == {"retry"}
    assert prod.post(f"/ui/jobs/{pending['id']}/retry").status_code == 403
    assert boss.post(f"/ui/jobs/{pending['id']}/retry").status_code == 302
    assert team.producer.get(f"/jobs/{pending['id']}").get_json()["status"] == "pending"


def test_cancelling_a_finished_job_says_why(team: Team) -> None:
    job = team.producer.enqueue()
    boss = team.person("boss")
    boss.post(f"/ui/jobs/{job['id']}/cancel")
    again = boss.hx_post(f"/ui/jobs/{job['id']}/cancel")
    assert again.status_code == 200
    assert "cannot be cancelled" in again.get_data(as_text=True)


def test_producer_cannot_cancel_a_running_job(team: Team) -> None:
    job = team.producer.enqueue()
    team.worker.claim()
    prod = team.person("prod")
    assert set(_actions(prod, job["id"])) == set()
    response = prod.hx_post(f"/ui/jobs/{job['id']}/cancel")
    assert "cannot be cancelled" in response.get_data(as_text=True)
    assert team.producer.get(f"/jobs/{job['id']}").get_json()["status"] == "running"


# --- admin --------------------------------------------------------------------------------------


def _user_row(boss: Person, name: str) -> Any:
    return soup(boss.get("/ui/admin/users")).find("th", string=name).parent


def _make_stale(person: Person) -> None:
    with person.client.session_transaction() as session:
        session["login_at"] -= 3600  # older than FRESH_LOGIN_SECONDS, within the session lifetime


def test_admin_creates_a_user_who_can_sign_in(team: Team) -> None:
    boss = team.person("boss")
    response = boss.post(
        "/ui/admin/users",
        {"name": "carol", "role": "producer", "max_priority": "high", "password": "p" * 14},
    )
    assert response.status_code == 302
    assert "carol" in _user_row(boss, "carol").get_text()
    carol = team.app.test_client()
    from tests.web.conftest import login

    assert login(carol, "carol", "p" * 14).status_code == 302
    duplicate = boss.post("/ui/admin/users", {"name": "carol", "role": "producer"})
    assert duplicate.status_code == 409
    short = boss.post("/ui/admin/users", {"name": "dave", "role": "worker", "password": "short"})
    assert short.status_code == 422


def test_role_change_needs_a_fresh_login(team: Team, app: Flask) -> None:
    boss = team.person("boss")
    prod2_id = soup(boss.get("/ui/admin/users")).find("th", string="prod2").parent
    prefix = prod2_id.find("select")["name"].split("-")[0]
    change = {f"{prefix}-role": "admin", f"{prefix}-max_priority": "critical"}
    _make_stale(boss)
    stale = boss.post("/ui/admin/users/prod2/update", change)
    assert stale.status_code == 302
    assert stale.location.startswith("/login?next=")
    assert "producer" in str(_user_row(boss, "prod2").find("option", selected=True))
    fresh = team.person("boss")
    assert fresh.post("/ui/admin/users/prod2/update", change).status_code == 302
    row = _user_row(fresh, "prod2")
    assert [o["value"] for o in row.find_all("option", selected=True)] == ["admin"]
    kept = row.find("input", attrs={"name": f"{prefix}-max_priority", "type": "hidden"})
    assert kept["value"] == "critical"  # an admin has no cap to choose: any priority


def test_disable_and_enable_a_user(team: Team) -> None:
    boss = team.person("boss")
    prod2 = team.person("prod2")
    assert boss.post("/ui/admin/users/prod2/disable").status_code == 302
    assert "disabled" in _user_row(boss, "prod2").get_text()
    assert prod2.get("/ui/").status_code == 302
    assert team.other_producer.get("/jobs").status_code == 401
    assert boss.post("/ui/admin/users/prod2/enable").status_code == 302
    assert team.other_producer.get("/jobs").status_code == 200
    assert boss.post("/ui/admin/users/boss/disable").status_code == 302  # refused, flashed
    assert "cannot disable yourself" in boss.get("/ui/admin/users").get_data(as_text=True)


def test_tokens_are_shown_once_listed_with_last_use_and_revocable(team: Team) -> None:
    boss = team.person("boss")
    issued = boss.post("/ui/admin/tokens", {"user": "work", "label": "ci runner"})
    assert issued.status_code == 201
    raw = soup(issued).find(id="new-token-value")["value"]
    assert raw.startswith("ql_")
    api = Api(team.worker.client, raw)
    assert api.get("/jobs").status_code == 200
    listing = boss.get("/ui/admin/tokens")
    assert raw not in listing.get_data(as_text=True)
    row = soup(listing).find("td", string="ci runner").parent
    assert "never" not in row.get_text()  # last use is recorded
    revoke = row.find("form")
    assert revoke["hx-confirm"]
    assert boss.post(revoke["action"]).status_code == 302
    assert api.get("/jobs").status_code == 401
    assert (
        "revoked" in soup(boss.get("/ui/admin/tokens")).find("td", string="ci runner").parent.text
    )


def test_htmx_posts_that_redirect_navigate_instead(team: Team) -> None:
    boss = team.person("boss")
    response = boss.hx_post("/ui/admin/users/prod2/disable")
    assert response.status_code == 200
    assert response.headers["HX-Redirect"] == "/ui/admin/users"


def test_issuing_tokens_and_re_enabling_users_need_a_fresh_login(team: Team) -> None:
    boss = team.person("boss")
    assert boss.post("/ui/admin/users/prod2/disable").status_code == 302
    _make_stale(boss)
    issue = boss.post("/ui/admin/tokens", {"user": "boss", "label": "stale session"})
    assert issue.status_code == 302
    assert issue.location.startswith("/login?next=")
    assert "stale session" not in boss.get("/ui/admin/tokens").get_data(as_text=True)
    enable = boss.post("/ui/admin/users/prod2/enable")
    assert enable.status_code == 302 and enable.location.startswith("/login?next=")
    assert "disabled" in _user_row(boss, "prod2").get_text()


def test_hostile_admin_paths_and_labels_are_4xx(team: Team) -> None:
    boss = team.person("boss")
    assert boss.post("/ui/admin/tokens/99999999999999999999/revoke").status_code == 404
    assert boss.post("/ui/admin/users/%00x/disable").status_code == 404
    assert boss.post("/ui/admin/users/x%ED%A0%80/disable").status_code == 404
    nul_label = boss.post("/ui/admin/tokens", {"user": "boss", "label": "a\x00b"})
    assert nul_label.status_code == 422


def test_run_at_is_typed_in_24_hour_utc_like_every_other_time(team: Team) -> None:
    """No datetime-local picker: it shows the browser's locale (12-hour mm/dd/yyyy) instead."""
    person = team.person("prod")
    field = soup(person.get("/ui/jobs/new")).find("input", attrs={"name": "run_at"})
    assert field.get("type", "text") == "text" and field["placeholder"] == "YYYY-MM-DD HH:MM"
    response = person.post("/ui/jobs/new", enqueue_form(run_at="2030-01-02 15:04"))
    assert response.status_code == 302
    job = team.producer.get(response.location.replace("/ui", "")).get_json()
    assert job["run_at"].startswith("2030-01-02T15:04:00") and job["run_at"].endswith("Z")
