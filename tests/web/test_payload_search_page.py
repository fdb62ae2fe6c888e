"""The jobs page's "Payload contains" field: the search kept in the URL (and in the bulk bar's
filters), the matching jobs shown, a bad search shown in the page as a 422, never a 500; a bulk
action from a payload search takes exactly the matching jobs. On both engines."""

from __future__ import annotations

import json
from urllib.parse import parse_qs, quote, urlsplit

from tests.api.conftest import snapshot
from tests.backends import every_backend  # noqa: F401 (run on both engines)
from tests.web.conftest import Team, soup

NEEDLE = json.dumps({"customer": 42})


def _shown(page: object) -> list[str]:
    return [a.get_text() for a in page.select("#jobs-table tbody td[data-label=Job] a")]  # type: ignore[attr-defined]


def test_the_field_filters_the_jobs_and_stays_in_the_url(team: Team) -> None:
    wanted = [team.producer.enqueue(payload={"customer": 42, "n": n})["id"] for n in range(2)]
    team.producer.enqueue(payload={"customer": 43})
    boss = team.person("boss")
    response = boss.get(f"/ui/jobs?payload={quote(NEEDLE)}")
    assert response.status_code == 200
    page = soup(response)
    assert page.select_one("#f-payload")["value"] == NEEDLE
    assert _shown(page) == [f"#{job_id}" for job_id in reversed(wanted)]
    bar = page.select_one("form.bulk-bar")
    assert bar is not None
    hidden = {i["name"]: i["value"] for i in bar.select("input[type=hidden]")}
    assert hidden == {"payload": NEEDLE}
    swapped = soup(boss.htmx(f"/ui/jobs?payload={quote(NEEDLE)}&status=pending"))
    assert _shown(swapped) == [f"#{job_id}" for job_id in reversed(wanted)]
    mine = soup(team.person("prod2").get(f"/ui/jobs?payload={quote(NEEDLE)}"))
    assert _shown(mine) == []  # another producer's jobs stay invisible


def test_a_bad_search_is_shown_in_the_page(team: Team) -> None:
    team.producer.enqueue(payload={"customer": 42})
    boss = team.person("boss")
    for text in ("customer=42", "[42]", '{"a":', '{"a":1,"a":2}', "{" * 3000):
        response = boss.get(f"/ui/jobs?payload={quote(text)}")
        assert response.status_code == 422, text
        page = soup(response)
        assert "payload" in page.select_one("#jobs-table").get_text()
        assert page.select_one("#f-payload")["aria-invalid"] == "true"


def test_a_bulk_cancel_from_a_payload_search_takes_the_matching_jobs(team: Team) -> None:
    wanted = [team.producer.enqueue(payload={"customer": 42})["id"] for _ in range(2)]
    other = team.producer.enqueue(payload={"customer": "42"})["id"]
    boss = team.person("boss")
    query = {"action": "cancel", "payload": NEEDLE}
    page = soup(boss.get("/ui/jobs/bulk", query_string=query))
    assert page.select_one(".bulk-number").get_text() == "2"
    form = page.select_one("form.bulk-confirm")
    assert form is not None
    fields = {i["name"]: i["value"] for i in form.select("input[type=hidden]")}
    assert fields["payload"] == NEEDLE
    response = boss.post("/ui/jobs/bulk", {**fields, "reason": "INC-42"})
    assert response.status_code == 302
    location = urlsplit(response.headers["Location"])
    assert (location.path, parse_qs(location.query)) == ("/ui/jobs", {"payload": [NEEDLE]})
    api = team.admin
    assert {api.get(f"/jobs/{i}").get_json()["status"] for i in wanted} == {"cancelled"}
    assert api.get(f"/jobs/{other}").get_json()["status"] == "pending"


def test_a_bad_bulk_search_is_shown_and_changes_nothing(team: Team) -> None:
    team.producer.enqueue(payload={"customer": 42})
    boss = team.person("boss")
    before = snapshot(team.app)
    response = boss.get("/ui/jobs/bulk", query_string={"action": "cancel", "payload": "[1]"})
    assert response.status_code == 422
    assert "payload: must be a JSON object" in soup(response).get_text()
    assert snapshot(team.app) == before
