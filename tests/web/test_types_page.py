"""The job types page (admins only), with CSRF on: counts and limits per type, the pause switch
and the limits form, audited like the API; and the job page saying its type is held back."""

from __future__ import annotations

from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from tests.web.conftest import Team, soup
from tests.web.test_pages import assert_clean_markup


@pytest.fixture
def app_config() -> dict[str, Any]:
    return {"JOB_TYPE_SETTINGS": {"report.build": {"max_running": 3}}}


def card(team: Team, index: int) -> Any:
    page = team.person("boss").get("/ui/types/")
    assert page.status_code == 200
    return assert_clean_markup(page).select_one(f"#type-{index}")


def type_changes(team: Team) -> list[dict[str, Any]]:
    events = team.admin.get("/audit?action=type_change").get_json()["events"]
    return [{"actor": e["actor"], "target": e["target"], **e["details"]} for e in events]


def test_cards_show_counts_limits_and_their_source(team: Team) -> None:
    team.producer.enqueue("report.build")
    team.producer.enqueue("report.build")
    team.worker.claim()
    report = card(team, 1)
    assert report.select_one("h2").get_text() == "report.build"
    counts = [li.get_text(" ", strip=True) for li in report.select(".type-counts li")]
    assert counts == ["pending 1", "running 1", "completed 0", "failed 0", "cancelled 0"]
    facts = report.select_one(".facts").get_text(" ", strip=True)
    assert "Max running 3 configured" in facts and "Rate limit no limit" in facts
    assert report.select_one(".badge-completed").get_text() == "active"
    links = {a["href"] for a in soup(team.person("boss").get("/ui/")).select("nav a")}
    assert "/ui/types/" in links


def test_pause_and_resume_are_audited_and_hold_the_claim(team: Team) -> None:
    boss = team.person("boss")
    job = team.producer.enqueue("webhook.deliver")
    paused = boss.hx_post("/ui/types/webhook.deliver/pause")
    assert paused.headers["HX-Redirect"] == "/ui/types/"
    assert card(team, 2).select_one(".badge").get_text() == "paused"
    assert team.worker.claim() is None
    page = soup(team.person("prod").get(f"/ui/jobs/{job['id']}"))
    reason = page.select_one(".reasons li.reason-type_paused")
    assert reason is not None and "webhook.deliver is paused by an admin" in reason.get_text()
    boss.hx_post("/ui/types/webhook.deliver/resume")
    claimed = team.worker.claim()
    assert claimed is not None and claimed["id"] == job["id"]
    assert type_changes(team) == [
        {"actor": "boss", "target": "type:webhook.deliver", "paused": False},
        {"actor": "boss", "target": "type:webhook.deliver", "paused": True},
    ]


def test_the_limits_form_sets_and_clears_overrides(team: Team) -> None:
    boss = team.person("boss")
    saved = boss.post(
        "/ui/types/report.build/limits",
        {
            "type-1-max_running": " 1 ",
            "type-1-rate_limit": "20/minute",
            "type-1-max_run_seconds": "900",
        },
    )
    assert saved.status_code == 302
    facts = card(team, 1).select_one(".facts").get_text(" ", strip=True)
    assert "Max running 1 override · configured: 3" in facts
    assert "Rate limit 20/minute override · configured: no limit" in facts
    assert "Max run time 900 s override · configured: no limit" in facts
    form = card(team, 1).select_one("form[action='/ui/types/report.build/limits']")
    assert form.find(id="type-1-max_running")["value"] == "1"
    boss.post("/ui/types/report.build/limits", {"type-1-max_running": "", "type-1-rate_limit": ""})
    facts = card(team, 1).select_one(".facts").get_text(" ", strip=True)
    assert "Max running 3 configured" in facts and "Rate limit no limit" in facts
    assert type_changes(team)[0] == {
        "actor": "boss", "target": "type:report.build", "max_running": None, "rate_limit": None,
        "max_run_seconds": None, "partition_max_running": None, "partition_rate_limit": None,
    }  # fmt: skip


def test_the_limits_form_sets_and_clears_the_partition_limits(team: Team) -> None:
    boss = team.person("boss")
    fields = {"type-1-partition_max_running": "2", "type-1-partition_rate_limit": " 5/minute "}
    assert boss.post("/ui/types/report.build/limits", fields).status_code == 302
    facts = card(team, 1).select_one(".facts").get_text(" ", strip=True)
    assert "Max running per partition 2 override · configured: no limit" in facts
    assert "Rate limit per partition 5/minute override · configured: no limit" in facts
    form = card(team, 1).select_one("form[action='/ui/types/report.build/limits']")
    assert form.find(id="type-1-partition_max_running")["value"] == "2"
    assert form.find(id="type-1-partition_rate_limit")["value"] == "5/minute"
    (change,) = type_changes(team)
    assert (change["partition_max_running"], change["partition_rate_limit"]) == (2, "5/minute")
    boss.post("/ui/types/report.build/limits", {"type-1-partition_max_running": ""})
    facts = card(team, 1).select_one(".facts").get_text(" ", strip=True)
    assert "Max running per partition no limit" in facts
    assert "Rate limit per partition no limit" in facts


BAD_LIMITS = [
    ({"type-0-max_running": "0"}, "max_running"),
    ({"type-0-max_running": "many"}, "max_running"),
    ({"type-0-max_running": "1" * 30}, "max_running"),
    ({"type-0-rate_limit": "10 per minute"}, "rate_limit"),
    ({"type-0-max_run_seconds": "0"}, "max_run_seconds"),
    ({"type-0-max_run_seconds": "1h"}, "max_run_seconds"),
    ({"type-0-partition_max_running": "0"}, "partition_max_running"),
    ({"type-0-partition_max_running": "two"}, "partition_max_running"),
    ({"type-0-partition_rate_limit": "3/day"}, "partition_rate_limit"),
]


def test_bad_limits_are_shown_on_their_field_and_change_nothing(team: Team) -> None:
    boss = team.person("boss")
    for fields, field in BAD_LIMITS:
        response = boss.post("/ui/types/email.send/limits", fields)
        assert response.status_code == 422, fields
        page = soup(response)
        error = page.find(id=f"type-0-{field}-error")
        assert error is not None and error.get_text().strip(), fields
        assert page.find(id=f"type-0-{field}")["aria-invalid"] == "true"
        assert page.select_one("#type-0 details").has_attr("open")
    assert boss.hx_post("/ui/types/shell.exec/pause").status_code == 404
    assert boss.post("/ui/types/shell.exec/limits", {"type-9-max_running": "1"}).status_code == 404
    assert type_changes(team) == []


def test_only_admins_see_and_change_types(team: Team, client: FlaskClient) -> None:
    for name in ("prod", "work"):
        person = team.person(name)
        assert person.get("/ui/types/").status_code == 403
        for action in ("pause", "resume"):
            assert person.hx_post(f"/ui/types/email.send/{action}").status_code == 403
        response = person.post("/ui/types/email.send/limits", {"type-0-max_running": "1"})
        assert response.status_code == 403
    anonymous = client.get("/ui/types/")
    assert anonymous.status_code == 302 and anonymous.location.startswith("/login?next=")
    assert type_changes(team) == []


def test_posts_without_the_csrf_token_change_nothing(team: Team, app: Flask) -> None:
    boss = team.person("boss")
    assert boss.client.post("/ui/types/email.send/pause").status_code == 400
    data = {"type-0-max_running": "1"}
    assert boss.client.post("/ui/types/email.send/limits", data=data).status_code == 400
    assert type_changes(team) == []


def test_the_job_page_says_its_partition_holds_it(team: Team) -> None:
    boss = team.person("boss")
    fields = {"type-0-partition_max_running": "1"}
    assert boss.post("/ui/types/email.send/limits", fields).status_code == 302
    team.producer.enqueue("email.send", partition="acme")
    held = team.producer.enqueue("email.send", partition="acme")
    assert team.worker.claim() is not None
    page = soup(team.person("prod").get(f"/ui/jobs/{held['id']}"))
    reason = page.select_one(".reasons li.reason-partition_limit")
    assert reason is not None and "running in partition acme" in reason.get_text()
