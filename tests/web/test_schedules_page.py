"""The schedules page (admins only) and the explanation on the job page, with CSRF on."""

from __future__ import annotations

from typing import Any

import pytest
from flask.testing import FlaskClient

from tests.web.conftest import Team, soup
from tests.web.test_pages import assert_clean_markup

FORM = {
    "name": "nightly",
    "cron": "0 2 * * *",
    "timezone": "Europe/Paris",
    "type": "report.build",
    "priority": "medium",
    "payload": '{"report": "sales"}',
    "catch_up": "one",
    "enabled": "y",
}


def create(team: Team, **fields: Any) -> Any:
    return team.person("boss").post("/ui/schedules/", FORM | fields)


@pytest.mark.parametrize("name", ["prod", "work"])
def test_only_admins_see_the_page(team: Team, name: str) -> None:
    assert create(team).status_code == 302
    person = team.person(name)
    assert person.get("/ui/schedules/").status_code == 403
    for action in ("run", "disable", "delete"):
        assert person.hx_post(f"/ui/schedules/1/{action}").status_code == 403
    assert person.post("/ui/schedules/", FORM | {"name": "mine"}).status_code == 403
    links = {a["href"] for a in soup(person.get("/ui/")).select("nav a")}
    assert "/ui/schedules/" not in links
    boss = soup(team.person("boss").get("/ui/schedules/"))
    assert [h.get_text() for h in boss.select(".schedule h2")] == ["nightly"]


def test_anonymous_is_sent_to_the_login(client: FlaskClient) -> None:
    response = client.get("/ui/schedules/")
    assert response.status_code == 302 and response.location.startswith("/login?next=")


def test_create_and_list_with_the_next_five_fire_times(team: Team) -> None:
    response = create(team)
    assert response.status_code == 302
    boss = team.person("boss")
    page = boss.get("/ui/schedules/")
    assert page.status_code == 200
    html = assert_clean_markup(page)
    assert "/ui/schedules/" in {a["href"] for a in html.select("nav a")}
    card = html.select_one("#schedule-1")
    text = card.get_text(" ", strip=True)
    for expected in ("nightly", "0 2 * * *", "Europe/Paris", "report.build", "enabled", "never"):
        assert expected in text
    runs = card.select(".next-runs time")
    assert len(runs) == 5
    assert all(t["datetime"].endswith(("01:00:00+00:00", "00:00:00+00:00")) for t in runs)
    assert "02:00 in Europe/Paris" in card.select_one(".next-runs").get_text()


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"cron": "every night"}, "cron"),
        ({"timezone": "Atlantis/Capital"}, "timezone"),
        ({"type": "shell.exec"}, "type"),
        ({"payload": "{not json"}, "payload"),
        ({"payload": "[1, 2]"}, "payload"),
        ({"name": ""}, "name"),
    ],
)
def test_bad_input_is_shown_on_its_field(team: Team, fields: dict[str, str], field: str) -> None:
    response = create(team, **fields)
    assert response.status_code == 422
    page = soup(response)
    error = page.find(id=f"{field}-error")
    assert error is not None and error.get_text().strip()
    assert page.find(id=field)["aria-invalid"] == "true"
    assert page.select(".schedule") == []  # nothing was created


def test_duplicate_names_are_refused_on_the_name(team: Team) -> None:
    assert create(team).status_code == 302
    response = create(team)
    assert response.status_code == 409
    assert "already exists" in soup(response).find(id="name-error").get_text()


def test_buttons_disable_enable_run_and_delete(team: Team) -> None:
    assert create(team).status_code == 302
    boss = team.person("boss")
    page = soup(boss.get("/ui/schedules/"))
    forms = {f["action"] for f in page.select("#schedule-1 form")}
    assert forms == {f"/ui/schedules/1/{a}" for a in ("run", "disable", "delete")}
    disabled = boss.hx_post("/ui/schedules/1/disable")
    assert disabled.headers["HX-Redirect"] == "/ui/schedules/"
    card = soup(boss.get("/ui/schedules/")).select_one("#schedule-1")
    assert "disabled" in card.get_text() and "None while disabled" in card.get_text()
    ran = boss.hx_post("/ui/schedules/1/run")
    assert ran.headers["HX-Redirect"] == "/ui/schedules/"
    after = soup(boss.get("/ui/schedules/"))
    assert "Job 1 enqueued." in after.get_text()
    assert after.select_one("#schedule-1 .facts time") is not None  # the last run
    job = team.admin.get("/jobs/1").get_json()
    assert (job["type"], job["payload"], job["priority"]) == (
        "report.build", {"report": "sales"}, "medium",
    )  # fmt: skip
    boss.hx_post("/ui/schedules/1/enable")
    assert "enabled" in soup(boss.get("/ui/schedules/")).select_one("#schedule-1 .badge").text
    boss.hx_post("/ui/schedules/1/delete")
    assert soup(boss.get("/ui/schedules/")).select(".schedule") == []
    assert boss.hx_post("/ui/schedules/1/run").status_code == 404


def test_posts_without_the_csrf_token_change_nothing(team: Team) -> None:
    assert create(team).status_code == 302
    boss = team.person("boss")
    assert boss.client.post("/ui/schedules/1/disable").status_code == 400
    assert boss.client.post("/ui/schedules/", data=FORM | {"name": "x"}).status_code == 400
    assert "enabled" in soup(boss.get("/ui/schedules/")).select_one("#schedule-1 .badge").text


def test_the_job_page_says_why_a_job_is_not_running(team: Team) -> None:
    later = team.producer.enqueue(run_at="2099-01-01T00:00:00Z")
    due = team.producer.enqueue()
    prod = team.person("prod")
    page = soup(prod.get(f"/ui/jobs/{later['id']}"))
    panel = page.find(id="why-h").parent
    assert panel.find("h2").get_text() == "Why is this job not running?"
    assert "scheduled for 2099-01-01 00:00:00 UTC" in panel.get_text()
    fragment = soup(prod.htmx(f"/ui/jobs/{due['id']}"))  # the polling refresh carries it too
    reasons = [li["class"][0] for li in fragment.select(".reasons li")]
    assert reasons == ["reason-behind_in_queue", "reason-no_worker_polling"]
    held = team.worker.claim()
    assert held is not None and held["id"] == due["id"]
    running = soup(prod.get(f"/ui/jobs/{due['id']}")).find(id="why-h")
    assert running.get_text() == "What is this job doing?"
    assert "Worker work holds attempt 1" in running.parent.get_text()
