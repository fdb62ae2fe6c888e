"""The retention page (admins only): how long each finished status and the audit log are kept
(the configuration merged with the defaults) and what the last prune removed."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from app.infra import db
from app.queue.rules import retention
from tests.web.conftest import Team, sign_in, soup


@pytest.fixture
def app_config() -> dict[str, Any]:
    return {"RETENTION": {"completed": 3_600, "failed": None}, "AUDIT_RETENTION": 7 * 86_400}


def _facts(html: Any, heading: str) -> dict[str, str]:
    card = html.find("h2", string=heading).find_parent("article")
    names = [dt.get_text(strip=True) for dt in card.find_all("dt")]
    return dict(
        zip(names, [dd.get_text(" ", strip=True) for dd in card.find_all("dd")], strict=True)
    )


def test_admins_see_the_settings_and_the_last_prune(team: Team) -> None:
    boss = sign_in(team.app, "boss")
    page = soup(boss.get("/ui/retention"))
    assert _facts(page, "Kept for") == {
        "Cancelled jobs": "14 days",
        "Completed jobs": "1 h 00 min",
        "Failed jobs": "forever",
        "Audit rows": "7 days",
    }
    assert "No prune has removed anything yet" in page.get_text()
    at = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
    pruned = retention.Pruned({"cancelled": 2, "completed": 1500}, 4506, 7)
    with db.transaction(team.app) as conn:
        retention.record(conn, pruned, at=at)
    last = _facts(soup(boss.get("/ui/retention")), "Last prune")
    assert last == {
        "When": "2030-01-02 03:04:05 UTC",
        "Jobs": "1,502 (2 cancelled, 1,500 completed)",
        "Events": "4,506",
        "Audit rows": "7",
    }


def test_the_page_is_for_admins_only(team: Team) -> None:
    for name in ("prod", "work"):
        person = sign_in(team.app, name)
        assert person.get("/ui/retention").status_code == 403
    assert team.app.test_client().get("/ui/retention").status_code == 302
    audit = sign_in(team.app, "boss").get("/ui/admin/audit").get_data(as_text=True)
    assert 'href="/ui/retention"' in audit
