"""The pages by role: who sees what, errors for admins only, no stored XSS, CSRF everywhere."""

from __future__ import annotations

import re
from typing import Any

import pytest
from bs4 import BeautifulSoup
from flask import Flask
from werkzeug.test import TestResponse

from app.extensions import csrf
from tests.web.conftest import Person, Team, soup

SECRET_ERROR = "ERRTEXT-zq81-reactor-meltdown"
ALLOWED_SCRIPTS = {"/static/htmx.min.js", "/static/app.js"}


def assert_clean_markup(response: TestResponse) -> BeautifulSoup:
    """No inline script, inline style or event handler: the CSP would block them anyway."""
    page = soup(response)
    for script in page.find_all("script"):
        assert script.get("src") in ALLOWED_SCRIPTS, script
    for tag in page.find_all(True):
        for attribute in tag.attrs:
            assert not attribute.lower().startswith("on"), tag
            assert attribute.lower() != "style", tag
    return page


def failed_job(team: Team, error: str = SECRET_ERROR) -> dict[str, Any]:
    """A producer's job that a worker failed for good."""
    job = team.producer.enqueue(max_retries=0)
    held = team.worker.claim()
    assert held is not None and held["id"] == job["id"]
    response = team.worker.post(f"/jobs/{job['id']}/fail", {"error": error})
    assert response.get_json()["status"] == "failed"
    return job


def retrying_job(team: Team, error: str = SECRET_ERROR) -> dict[str, Any]:
    """A producer's job that failed once and waits for its retry (pending, with an error)."""
    job = team.producer.enqueue(max_retries=3)
    team.worker.claim()
    response = team.worker.post(f"/jobs/{job['id']}/fail", {"error": error, "retry_in": 3600})
    assert response.get_json()["status"] == "pending"
    return job


# --- role x page matrix ---------------------------------------------------------------------

PAGES = [
    "/ui/",
    "/ui/jobs",
    "/ui/jobs/{job}",
    "/ui/jobs/new",
    "/ui/admin/users",
    "/ui/admin/tokens",
    "/ui/account/password",
    "/ui/account/second-factor",
]
EXPECTED = {
    "prod": [200, 200, 200, 200, 403, 403, 200, 200],
    "prod2": [200, 200, 404, 200, 403, 403, 200, 200],  # another producer's job is "not found"
    "work": [200, 200, 200, 403, 403, 403, 200, 200],  # the worker held the job
    "boss": [200, 200, 200, 200, 200, 200, 200, 200],
}


@pytest.mark.parametrize("name", list(EXPECTED))
def test_role_page_matrix(team: Team, name: str) -> None:
    job = failed_job(team)
    person = team.person(name)
    for path, status in zip(PAGES, EXPECTED[name], strict=True):
        response = person.get(path.format(job=job["id"]))
        assert response.status_code == status, (name, path)
        assert_clean_markup(response)


def test_anonymous_sees_only_the_login(team: Team, client) -> None:
    job = failed_job(team)
    for path in PAGES:
        response = client.get(path.format(job=job["id"]))
        assert response.status_code == 302
        assert response.location.startswith("/login?next=")


def test_navigation_follows_the_role(team: Team) -> None:
    links = {
        name: {a["href"] for a in soup(team.person(name).get("/ui/")).select("header nav a")}
        for name in ("prod", "work", "boss")
    }
    assert "/ui/jobs/new" in links["prod"] and "/ui/admin/users" not in links["prod"]
    assert "/ui/jobs/new" not in links["work"]
    assert {"/ui/admin/users", "/ui/admin/tokens"} <= links["boss"]
    assert {"/ui/workers", "/ui/types/", "/ui/admin/audit"} <= links["boss"]  # at the top


def test_producer_lists_only_own_jobs(team: Team) -> None:
    mine = team.producer.enqueue()
    theirs = team.other_producer.enqueue()
    page = soup(team.person("prod").get("/ui/jobs"))
    ids = {a.get_text() for a in page.select("#jobs-table tbody a")}
    assert f"#{mine['id']}" in ids
    assert f"#{theirs['id']}" not in ids


# --- errors are for admins only ----------------------------------------------------------------


def _every_view(person: Person, team: Team, jobs: list[dict[str, Any]]) -> list[TestResponse]:
    views = [person.get("/ui/"), person.get("/ui/jobs"), person.htmx("/ui/jobs")]
    views += [person.get("/ui/jobs?status=failed"), person.htmx("/ui/jobs?status=failed&live=1")]
    for job in jobs:
        views += [person.get(f"/ui/jobs/{job['id']}"), person.htmx(f"/ui/jobs/{job['id']}")]
    return views


def test_error_is_shown_to_admins(team: Team) -> None:
    jobs = [failed_job(team), retrying_job(team)]
    boss = team.person("boss")
    views = _every_view(boss, team, jobs)
    for response in views:
        assert response.status_code in (200, 286)
    shown = [SECRET_ERROR in r.get_data(as_text=True) for r in views]
    assert all(shown), shown


@pytest.mark.parametrize("name", ["prod", "work"])
def test_error_is_absent_for_everyone_else(team: Team, name: str) -> None:
    jobs = [failed_job(team), retrying_job(team)]
    person = team.person(name)
    views = _every_view(person, team, jobs)
    cancel = person.hx_post(f"/ui/jobs/{jobs[1]['id']}/cancel")
    assert cancel.status_code in (200, 403)
    for response in [*views, cancel]:
        assert response.status_code in (200, 286, 403)
        html = response.get_data(as_text=True)
        assert SECRET_ERROR not in html
        assert "meltdown" not in html
        assert "Last error" not in html


def test_admin_latest_failures_on_dashboard(team: Team) -> None:
    job = failed_job(team)
    board = soup(team.person("boss").get("/ui/"))
    section = board.find(id="failures").parent
    assert f"#{job['id']}" in section.get_text()
    assert soup(team.person("prod").get("/ui/")).find(id="failures") is None


# --- stored XSS sweep ----------------------------------------------------------------------------

HOSTILE = [
    "<script>alert(1)</script>",
    '<img src=x onerror="alert(1)">',
    '<div hx-get="/ui/admin/users" hx-trigger="load">x</div>',
    "javascript:alert(1)",
    "{{7*7}}",
    "'\"><svg/onload=alert(1)>",
]
KEY = "<script>alert(1)</script>{{7*7}}"  # idempotency keys allow any printable ASCII but spaces


def _assert_inert(response: TestResponse) -> None:
    html = response.get_data(as_text=True)
    page = assert_clean_markup(response)
    assert "<script>alert" not in html
    assert "<img src=x" not in html
    assert "<svg/onload" not in html
    assert '<div hx-get="/ui/admin/users"' not in html
    for tag in page.find_all(True):
        for attribute, value in tag.attrs.items():
            if attribute.startswith("hx-"):
                assert '/ui/admin/users" hx-trigger' not in str(value)
                assert tag.name != "div" or tag.get("id") in {"jobs-table", "job-detail"}, tag
        href = str(tag.get("href", ""))
        assert not href.lower().startswith("javascript:"), tag
    # Data is never evaluated as a template: the payload's "{{7*7}}" never turns into "49".
    assert "&#34;49&#34;" not in html and '"49"' not in html


def test_stored_xss_is_rendered_inert_everywhere(team: Team) -> None:
    payload = {text: text for text in HOSTILE}
    running = team.producer.enqueue(payload=payload, idempotency_key=KEY, priority="medium")
    held = team.worker.claim()
    assert held["id"] == running["id"]
    beat = team.worker.post(
        f"/jobs/{running['id']}/heartbeat", {"progress": 40, "message": " ".join(HOSTILE)}
    )
    assert beat.status_code == 200
    done = team.producer.enqueue(payload=payload)
    team.worker.claim()
    team.worker.post(f"/jobs/{done['id']}/complete", {"result": payload})
    failed = team.producer.enqueue(payload=payload, max_retries=0)
    team.worker.claim()
    team.worker.post(f"/jobs/{failed['id']}/fail", {"error": " ".join(HOSTILE)})

    boss = team.person("boss")
    assert boss.post("/ui/admin/tokens", {"user": "work", "label": HOSTILE[1]}).status_code == 201
    job_ids = [running["id"], done["id"], failed["id"]]
    for person in (boss, team.person("prod")):
        views = [person.get("/ui/"), person.get("/ui/jobs"), person.htmx("/ui/jobs?live=1")]
        views.append(person.get("/ui/jobs", query_string={"q": KEY}))
        for job_id in job_ids:
            views += [person.get(f"/ui/jobs/{job_id}"), person.htmx(f"/ui/jobs/{job_id}")]
        if person is boss:
            views += [boss.get("/ui/admin/users"), boss.get("/ui/admin/tokens")]
        for response in views:
            assert response.status_code in (200, 286), response.request.path
            _assert_inert(response)
    # The text is shown as text: escaped, not dropped.
    page = soup(boss.get(f"/ui/jobs/{running['id']}"))
    assert "<script>alert(1)</script>" in page.get_text()
    assert KEY in page.get_text()
    assert "{{7*7}}" in page.get_text()


# --- CSRF on every POST route --------------------------------------------------------------------


def _sample_args(rule: Any, job_id: int, token_id: int) -> dict[str, Any]:
    samples = {"job_id": job_id, "name": "prod2", "token_id": token_id, "schedule_id": 1}
    samples["job_type"] = "email.send"
    return {arg: samples[arg] for arg in rule.arguments}


def test_every_post_route_outside_the_api_requires_csrf(app: Flask, team: Team) -> None:
    job = team.producer.enqueue()
    boss = team.person("boss")
    boss.post("/ui/admin/tokens", {"user": "prod2", "label": "x"})
    # the JSON API and every route module's blueprint nested in it: bearer tokens only
    exempt = {name for name, bp in app.blueprints.items() if bp in csrf._exempt_blueprints}
    assert exempt == {"api"} | {name for name in app.blueprints if name.startswith("api.")}
    assert len(exempt) == 10
    checked = []
    with app.test_request_context():
        for rule in app.url_map.iter_rules():
            if "POST" not in (rule.methods or ()) or rule.endpoint.rsplit(".", 1)[0] in exempt:
                continue
            path = rule.build(_sample_args(rule, job["id"], 1), append_unknown=False)[1]
            response = boss.client.post(path, data={})
            assert response.status_code == 400, path
            assert "CSRF" in response.get_data(as_text=True), path
            htmx = boss.client.post(path, headers={"HX-Request": "true", "X-CSRFToken": "forged"})
            assert htmx.status_code == 400, path
            checked.append(rule.endpoint)
    assert len(checked) >= 10, checked
    # Nothing happened: the job is still pending, prod2 still enabled.
    assert team.producer.get(f"/jobs/{job['id']}").get_json()["status"] == "pending"
    assert (
        "disabled" not in soup(boss.get("/ui/admin/users")).find("th", string="prod2").parent.text
    )


def test_csrf_token_travels_in_hx_headers_on_body(team: Team) -> None:
    person = team.person("prod")
    response = person.get("/ui/jobs")
    raw = response.get_data(as_text=True)
    assert re.search(r"<body hx-headers='\{\"X-CSRFToken\": \"[^\"']+\"\}'>", raw)
    job = team.producer.enqueue()
    cancel = person.hx_post(f"/ui/jobs/{job['id']}/cancel")
    assert cancel.status_code == 200
    assert "cancelled" in cancel.get_data(as_text=True)


# --- htmx: fragments, polling, headers -----------------------------------------------------


def test_fragments_vary_on_hx_request(team: Team) -> None:
    person = team.person("prod")
    page = person.get("/ui/jobs?status=failed")
    fragment = person.htmx("/ui/jobs?status=failed")
    assert "HX-Request" in page.headers["Vary"]
    assert "HX-Request" in fragment.headers["Vary"]
    assert "<html" in page.get_data(as_text=True)
    assert "<html" not in fragment.get_data(as_text=True)
    assert soup(fragment).find(id="jobs-table") is not None


def test_history_restore_gets_the_whole_page(team: Team) -> None:
    response = team.person("prod").htmx("/ui/jobs", headers={"HX-History-Restore-Request": "true"})
    assert "<html" in response.get_data(as_text=True)


def test_filter_form_drives_htmx_and_push_url(team: Team) -> None:
    page = soup(team.person("prod").get("/ui/jobs?status=failed"))
    form = page.find("form", id="job-filters")
    assert form["hx-get"] == "/ui/jobs"
    assert form["hx-target"] == "#jobs-table"
    assert form["hx-push-url"] == "true"
    assert page.select_one("select[name=status] option[selected]")["value"] == "failed"
    assert page.find("input", attrs={"name": "q"}) is not None


def test_finished_job_polling_stops_with_286(team: Team) -> None:
    done = failed_job(team)
    person = team.person("prod")
    response = person.htmx(f"/ui/jobs/{done['id']}")
    assert response.status_code == 286
    assert soup(response).find(id="job-detail").get("hx-trigger") is None


def test_running_job_polls_until_finished(team: Team) -> None:
    job = team.producer.enqueue()
    team.worker.claim()
    team.worker.post(f"/jobs/{job['id']}/heartbeat", {"progress": 30})
    person = team.person("prod")
    response = person.htmx(f"/ui/jobs/{job['id']}")
    assert response.status_code == 200
    detail = soup(response).find(id="job-detail")
    assert detail["hx-trigger"].startswith("every ")
    assert detail.find("progress")["value"] == "30"
    team.worker.post(f"/jobs/{job['id']}/complete", {"result": {"ok": True}})
    assert person.htmx(f"/ui/jobs/{job['id']}").status_code == 286


def test_live_refresh_toggle_polls_the_table(team: Team) -> None:
    person = team.person("prod")
    still = soup(person.htmx("/ui/jobs?status=pending")).find(id="jobs-table")
    live = soup(person.htmx("/ui/jobs?status=pending&live=1")).find(id="jobs-table")
    assert still.get("hx-trigger") is None
    assert live["hx-trigger"].startswith("every ")
    assert live["hx-get"] == "/ui/jobs?status=pending&live=1"


def test_keyset_pagination_older_and_newer(team: Team) -> None:
    ids = [team.producer.enqueue()["id"] for _ in range(30)]
    person = team.person("prod")
    first = soup(person.get("/ui/jobs"))
    shown = [a.get_text() for a in first.select("#jobs-table tbody a")]
    assert shown[0] == f"#{ids[-1]}" and len(shown) == 25
    older = first.find("a", rel="next")
    assert first.find("a", rel="prev") is None
    second = soup(person.get(older["href"]))
    assert [a.get_text() for a in second.select("#jobs-table tbody a")] == [
        f"#{i}" for i in reversed(ids[:5])
    ]
    newer = second.find("a", rel="prev")
    back = soup(person.get(newer["href"]))
    assert [a.get_text() for a in back.select("#jobs-table tbody a")] == shown


def test_empty_states(team: Team) -> None:
    person = team.person("prod")
    assert "No jobs yet" in person.get("/ui/jobs").get_data(as_text=True)
    assert "No jobs match" in person.get("/ui/jobs?status=failed").get_data(as_text=True)


def test_bad_filter_is_a_clear_422_not_a_500(team: Team) -> None:
    person = team.person("prod")
    response = person.get("/ui/jobs?status=exploded")
    assert response.status_code == 422
    assert "status must be one of" in response.get_data(as_text=True)
    assert person.get("/ui/jobs?cursor=garbage").status_code == 422


def test_search_finds_by_id_and_idempotency_key(team: Team) -> None:
    keyed = team.producer.enqueue(idempotency_key="order-42")
    other = team.producer.enqueue()
    person = team.person("prod")
    by_key = soup(person.get("/ui/jobs?q=order-42")).select("#jobs-table tbody a")
    by_id = soup(person.get(f"/ui/jobs?q={other['id']}")).select("#jobs-table tbody a")
    assert [a.get_text() for a in by_key] == [f"#{keyed['id']}"]
    assert [a.get_text() for a in by_id] == [f"#{other['id']}"]


def test_security_headers_on_pages(team: Team, client) -> None:
    for response in (client.get("/login"), team.person("prod").get("/ui/")):
        csp = response.headers["Content-Security-Policy"]
        script_src = next(p for p in csp.split(";") if p.strip().startswith("script-src"))
        assert "unsafe-inline" not in script_src and "unsafe-eval" not in script_src
        assert "frame-ancestors 'none'" in csp
        assert response.headers["X-Content-Type-Options"] == "nosniff"
        assert response.headers["Referrer-Policy"] == "strict-origin-when-cross-origin"
        assert response.headers["Cache-Control"] == "no-store"


def test_htmx_is_configured_without_eval(team: Team) -> None:
    page = soup(team.person("prod").get("/ui/"))
    config = page.find("meta", attrs={"name": "htmx-config"})["content"]
    assert '"allowEval":false' in config
    assert '"includeIndicatorStyles":false' in config


def test_templates_never_mark_data_safe() -> None:
    from pathlib import Path

    for template in Path("templates").rglob("*"):
        if template.is_file():
            assert template.suffix == ".html", template
            assert "|safe" not in template.read_text().replace(" ", ""), template


def test_a_repeated_filter_is_refused_like_the_api(team: Team) -> None:
    prod = team.person("prod")
    response = prod.get("/ui/jobs?status=pending&status=bogus")
    assert response.status_code == 422
    assert team.producer.get("/jobs?status=pending&status=failed").status_code == 422


def test_an_admins_cap_reads_the_same_everywhere(team: Team) -> None:
    """The users page offers no cap for an admin and says admins enqueue any priority; the
    enqueue form shows the cap enqueue enforces: critical."""
    boss = team.person("boss")
    page = soup(boss.get("/ui/admin/users"))
    row = page.find("th", string="boss").parent
    assert row.find("select", id=re.compile("max_priority")) is None
    assert "admins enqueue any priority" in page.select_one("#who-signs-in").get_text()
    assert "Your cap is critical" in boss.get("/ui/jobs/new").get_data(as_text=True)


def test_only_failed_jobs_show_their_error_as_a_failure(team: Team) -> None:
    """An earlier attempt's error on a job that is pending, running, completed or cancelled is
    not shown in red: the row would read as failed."""
    failed = failed_job(team)
    retried = retrying_job(team)
    page = soup(team.person("boss").get("/ui/jobs"))
    cells = {
        int(row.find("a").text.lstrip("#")): row.find_all("td")[-1]
        for row in page.select("table.jobs tbody tr")
    }
    assert "error-text" in cells[failed["id"]]["class"]
    assert "error-text" not in cells[retried["id"]].get("class", [])
    assert cells[retried["id"]].text.startswith("earlier attempt: ")


def test_a_refusal_keeps_the_header_and_navigation(team: Team) -> None:
    response = team.person("prod").get("/ui/admin/users")
    assert response.status_code == 403
    nav = soup(response).find("nav", attrs={"aria-label": "Main"})
    assert nav is not None and nav.find("a", href="/ui/jobs") is not None
    assert "Sign out" in nav.text
