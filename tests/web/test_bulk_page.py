"""Bulk actions on the jobs page: admins only, a preview that changes nothing, a confirmation
that needs its CSRF token and a reason, a stale count refused with the new one, escaped text."""

from __future__ import annotations

import re
from typing import Any

from flask import Flask
from sqlalchemy import func, select

from app.infra import db
from app.storage.schema import audit_events
from tests.api.conftest import snapshot
from tests.web.conftest import Person, Team, soup


def audit_count(app: Flask) -> int:
    with app.app_context(), db.read() as conn:
        return int(conn.execute(select(func.count()).select_from(audit_events)).scalar_one())


def pending(team: Team, count: int) -> list[int]:
    return [team.producer.enqueue(delay_seconds=3600)["id"] for _ in range(count)]


def confirm(person: Person, count: int | str, **fields: Any) -> Any:
    data = {"action": "cancel", "status": "pending", "expect_count": count, "reason": "INC-1"}
    return person.post("/ui/jobs/bulk", data | fields)


def test_only_admins_get_the_control_and_the_page(team: Team) -> None:
    pending(team, 2)
    boss, prod = team.person("boss"), team.person("prod")
    assert soup(boss.get("/ui/jobs?status=pending")).select("form.bulk-bar")
    assert soup(boss.htmx("/ui/jobs?status=pending")).select("form.bulk-bar")  # the swapped table
    assert not soup(boss.get("/ui/jobs")).select("form.bulk-bar")  # only on a filtered view
    assert not soup(prod.get("/ui/jobs?status=pending")).select("form.bulk-bar")
    before = snapshot(team.app)
    assert prod.get("/ui/jobs/bulk?action=cancel&status=pending").status_code == 403
    assert confirm(prod, 2).status_code == 403
    assert team.person("work").get("/ui/jobs/bulk?action=cancel").status_code == 403
    assert snapshot(team.app) == before


def test_the_bar_carries_the_filters_to_the_preview(team: Team) -> None:
    ids = pending(team, 3)
    team.producer.enqueue("report.build", delay_seconds=3600)
    boss = team.person("boss")
    bar = soup(boss.get("/ui/jobs?status=pending&type=email.send")).select_one("form.bulk-bar")
    assert bar is not None and bar["action"] == "/ui/jobs/bulk" and bar["method"] == "get"
    hidden = {i["name"]: i["value"] for i in bar.select("input[type=hidden]")}
    assert hidden == {"status": "pending", "type": "email.send"}
    assert [o["value"] for o in bar.select("select[name=action] option")] == [
        "cancel",
        "retry",
        "delete",
    ]
    before = snapshot(team.app), audit_count(team.app)
    page = soup(boss.get("/ui/jobs/bulk", query_string={**hidden, "action": "cancel"}))
    assert page.select_one(".bulk-number").get_text() == "3"
    assert [a.get_text() for a in page.select(".bulk-preview tbody a")] == [
        f"#{i}" for i in reversed(ids)
    ]
    form = page.select_one("form.bulk-confirm")
    assert form is not None and form.select_one("input[name=csrf_token]")["value"]
    assert form.select_one("input[name=expect_count]")["value"] == "3"
    assert (snapshot(team.app), audit_count(team.app)) == before


def test_confirming_needs_the_csrf_token_and_a_reason(team: Team) -> None:
    pending(team, 2)
    boss = team.person("boss")
    before = snapshot(team.app), audit_count(team.app)
    forged = boss.client.post("/ui/jobs/bulk", data={"action": "cancel", "expect_count": "2"})
    assert forged.status_code == 400 and "CSRF" in forged.get_data(as_text=True)
    missing = confirm(boss, 2, reason="  ")
    assert missing.status_code == 422
    assert soup(missing).select_one("#reason-error").get_text() == (
        "must say why in visible characters"
    )
    for bad in ({"expect_count": "two"}, {"status": "done"}, {"action": "purge"}):
        assert confirm(boss, 2, **bad).status_code == 422, bad
    assert (snapshot(team.app), audit_count(team.app)) == before


def test_confirming_applies_it_and_says_so(team: Team) -> None:
    ids = pending(team, 3)
    boss = team.person("boss")
    response = confirm(boss, 3, reason="<script>alert(1)</script>")
    assert response.status_code == 302
    assert response.location == "/ui/jobs?status=pending"
    flash = soup(boss.get(response.location)).select_one(".flash-success").get_text()
    found = re.fullmatch(r"Operation (\d+): 3 job\(s\) cancelled\.", flash)
    assert found is not None, flash
    for job_id in ids:
        assert team.admin.get(f"/jobs/{job_id}").get_json()["status"] == "cancelled"
    timeline = boss.get(f"/ui/jobs/{ids[0]}").get_data(as_text=True)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in timeline and "<script>alert" not in timeline
    audit = soup(boss.get("/ui/admin/audit?action=job_bulk"))
    (row,) = audit.select("table.audit tbody tr")  # the operation, found by its number
    assert f"#{found[1]}" in row.get_text() and "jobs:cancel" in row.get_text()
    assert "<script>alert(1)</script>" in row.get_text() and not row.select("script")


def test_a_stale_confirmation_is_refused_with_the_new_count(team: Team) -> None:
    pending(team, 2)
    boss = team.person("boss")
    assert (
        soup(boss.get("/ui/jobs/bulk?action=cancel&status=pending"))
        .select_one(".bulk-number")
        .get_text()
        == "2"
    )
    pending(team, 1)  # the set changed before the confirmation
    before = snapshot(team.app), audit_count(team.app)
    response = confirm(boss, 2, reason="keep me")
    assert response.status_code == 409
    page = soup(response)
    assert "now selects 3 job(s), not 2" in page.select_one(".flash-error").get_text()
    assert page.select_one(".bulk-number").get_text() == "3"
    form = page.select_one("form.bulk-confirm")
    assert form.select_one("input[name=expect_count]")["value"] == "3"
    assert form.select_one("input[name=reason]")["value"] == "keep me"
    assert (snapshot(team.app), audit_count(team.app)) == before
    assert confirm(boss, 3).status_code == 302


def test_nothing_to_do_offers_no_confirmation(team: Team) -> None:
    pending(team, 1)
    page = soup(team.person("boss").get("/ui/jobs/bulk?action=retry&status=pending"))
    assert "No job matches" in page.select_one(".bulk-preview").get_text()
    assert page.select_one("form.bulk-confirm") is None
