"""The audit log (page, GET /audit, CLI) and the workers page: admins only, filters, paging."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from flask import Flask
from flask.testing import FlaskCliRunner
from sqlalchemy import func, select

from app.audit import store as audit_store
from app.audit.actions import AuditAction
from app.infra import db
from app.storage.schema import audit_events
from tests.api.conftest import assert_problem
from tests.builders import PASSWORD, make_user
from tests.web.conftest import Team, login, sign_in, soup


def seed_audit(app: Flask, count: int, *, at: datetime | None = None) -> None:
    with app.app_context(), db.transaction() as conn:
        for i in range(count):
            audit_store.append(
                conn,
                at=at or datetime.now(UTC),
                actor=f"actor{i % 3}",
                action=AuditAction.JOB_CANCEL if i % 2 else AuditAction.TOKEN_ISSUE,
                target=f"job:{i}",
                details={"i": i, "html": "<b>x</b>"},
                client_address="10.0.0.1",
            )


def audit_count(app: Flask) -> int:
    with app.app_context(), db.read() as conn:
        return int(conn.execute(select(func.count()).select_from(audit_events)).scalar_one())


def test_audit_api_pages_with_a_cursor_and_filters(team: Team) -> None:
    setup = audit_count(team.app)  # the team's users and tokens, audited as they were made
    seed_audit(team.app, 7)
    first = team.admin.get("/audit?limit=3&actor=actor1").get_json()
    assert [e["actor"] for e in first["events"]] == ["actor1"] * 2
    assert first["next_cursor"] is None
    page = team.admin.get("/audit?limit=3").get_json()
    seen = [e["id"] for e in page["events"]]
    while page["next_cursor"]:
        page = team.admin.get(f"/audit?limit=3&cursor={page['next_cursor']}").get_json()
        seen += [e["id"] for e in page["events"]]
    assert seen == sorted(seen, reverse=True) and len(seen) == len(set(seen)) == 7 + setup
    only = team.admin.get("/audit?action=job_cancel").get_json()["events"]
    assert {e["action"] for e in only} == {"job_cancel"} and len(only) == 3
    event = only[0]
    assert set(event) == {"id", "at", "actor", "action", "target", "details", "client_address"}
    today = datetime.now(UTC).date()
    events = team.admin.get(f"/audit?since={today}&until={today}").get_json()["events"]
    assert len(events) == 7 + setup
    tomorrow = today + timedelta(days=1)
    assert team.admin.get(f"/audit?since={tomorrow}").get_json()["events"] == []


def test_audit_api_refuses_bad_filters_and_non_admins(team: Team, anonymous) -> None:
    for query in ("action=nope", "since=yesterday", "limit=0", "limit=999", "cursor=-1", "x=1"):
        assert_problem(team.admin.get(f"/audit?{query}"), 422)
    assert_problem(anonymous.get("/audit"), 401)
    for caller in (team.producer, team.worker):
        assert_problem(caller.get("/audit"), 403)


def test_audit_page_filters_escapes_and_pages(team: Team) -> None:
    setup = audit_count(team.app)  # the team's users and tokens
    seed_audit(team.app, 60)
    boss = sign_in(team.app, "boss")
    response = boss.get("/ui/admin/audit")
    assert response.status_code == 200
    page = soup(response)
    assert len(page.select("table.audit tbody tr")) == 50
    assert "<b>x</b>" not in response.get_data(as_text=True)  # details are escaped
    older = page.find("a", string="Older →")
    assert older is not None
    rest = soup(boss.get(older["href"]))
    assert len(rest.select("table.audit tbody tr")) == 11 + setup  # 60 seeded + boss's sign-in
    filtered = soup(boss.get("/ui/admin/audit?actor=actor2&action=token_issue"))
    cells = [row.select("td")[1].get_text() for row in filtered.select("table.audit tbody tr")]
    assert cells and set(cells) == {"actor2"}
    bad = boss.get("/ui/admin/audit?since=not-a-date")
    assert bad.status_code == 422
    assert soup(bad).select_one("#since-error") is not None


def test_audit_and_workers_pages_are_for_admins_only(team: Team) -> None:
    for name in ("prod", "work"):
        person = sign_in(team.app, name)
        assert person.get("/ui/admin/audit").status_code == 403
        assert person.get("/ui/workers").status_code == 403
    anonymous = team.app.test_client()
    assert anonymous.get("/ui/workers").status_code == 302
    assert anonymous.get("/ui/admin/audit").status_code == 302


def test_a_monitor_gets_no_page(team: Team) -> None:
    """The monitor role scrapes /metrics with a token: its sign-in is refused (403, saying
    so), and every page sends it to the sign-in."""
    make_user(team.app, "watcher", "monitor", password=PASSWORD)
    client = team.app.test_client()
    assert login(client, "watcher").status_code == 403
    job = team.producer.enqueue()
    for path in (
        "/ui/",
        "/ui/jobs",
        f"/ui/jobs/{job['id']}",
        "/ui/jobs/new",
        "/ui/admin/users",
        "/ui/admin/tokens",
        "/ui/admin/audit",
        "/ui/workers",
    ):
        assert client.get(path).status_code == 302, path


def test_audit_cli_lists_and_prunes(app: Flask, runner: FlaskCliRunner) -> None:
    seed_audit(app, 4, at=datetime.now(UTC) - timedelta(days=100))
    seed_audit(app, 2)
    listed = runner.invoke(args=["audit", "list", "--limit", "3"])
    assert listed.exit_code == 0, listed.output
    lines = listed.output.splitlines()
    assert len(lines) == 4 and lines[-1].startswith("more: --cursor ")
    assert "\tjob_cancel\t" in listed.output or "\ttoken_issue\t" in listed.output
    assert runner.invoke(args=["audit", "list", "--action", "nope"]).exit_code != 0
    pruned = runner.invoke(args=["audit", "prune", "--older-than", "90d"])
    assert pruned.exit_code == 0, pruned.output
    assert "pruned 4 audit event(s)" in pruned.output
    assert audit_count(app) == 2
    assert runner.invoke(args=["audit", "prune", "--older-than", "soon"]).exit_code != 0


def test_workers_page_shows_each_worker(team: Team, app: Flask) -> None:
    make_user(app, "work2", "worker")
    for _ in range(4):
        team.producer.enqueue()
    done = team.worker.claim()
    assert done is not None
    team.worker.post(f"/jobs/{done['id']}/complete")
    failed = team.worker.claim()
    assert failed is not None
    team.worker.post(f"/jobs/{failed['id']}/fail", {"error": "x", "retryable": False})
    held = team.worker.claim()
    assert held is not None
    boss = sign_in(app, "boss")
    dashboard = soup(boss.get("/ui/"))
    assert dashboard.find("a", href="/ui/workers") is not None
    assert dashboard.find("a", href="/ui/admin/audit") is not None
    page = soup(boss.get("/ui/workers"))
    rows = page.select("table.workers tbody tr")
    assert len(rows) == 1
    cells = [c.get_text(strip=True) for c in rows[0].select("th, td")]
    assert cells[:5] == ["work", "1", "3", "1", "1"]
    assert "ago" in cells[5] and cells[6].startswith("in ")
