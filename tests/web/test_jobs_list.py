"""The jobs page for people with many jobs: how many match, every order an index keeps (both
ways), a page size in the URL, and first / previous / next through every job, on both
engines and for every role."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from urllib.parse import urlencode

import pytest

from app.queue.vocabulary.states import PRIORITIES
from tests.backends import every_backend  # noqa: F401 (run on both engines)
from tests.web.conftest import Person, Team, soup

# (sort, status) pairs an index keeps, and how the page must order them (Python's own sort).
ORDERS: list[tuple[str, str | None]] = [
    ("-created", None), ("created", None), ("-created", "pending"),
    ("-priority", "pending"), ("priority", "pending"), ("run_at", "pending"),
    ("-run_at", "pending"), ("-updated", "completed"), ("updated", "failed"),
    ("-updated", "running"), ("updated", "cancelled"),
]  # fmt: skip


def when(text: str | None) -> datetime:
    assert text is not None
    return datetime.fromisoformat(text)


def expected(jobs: list[dict[str, Any]], sort: str, status: str | None) -> list[int]:
    """The ids of ``jobs`` of ``status`` in the order ``sort`` names, sorted here."""
    chosen = [job for job in jobs if status is None or job["status"] == status]
    key = sort.removeprefix("-")
    keys = {
        "created": lambda j: (j["id"],),
        # ascending priority is the claim order reversed (later run times first)
        "priority": lambda j: (-PRIORITIES[j["priority"]], when(j["run_at"]), j["id"]),
        "run_at": lambda j: (when(j["run_at"]), j["id"]),
        "updated": lambda j: (when(j["finished_at"] or j["updated_at"]), j["id"]),
    }
    ordered = sorted(chosen, key=keys[key])
    if key == "priority":
        ordered.reverse()  # that key sorts the claim order, which is "-priority"
    if sort.startswith("-"):
        ordered.reverse()
    return [job["id"] for job in ordered]


def queue(team: Team) -> list[dict[str, Any]]:
    """Jobs of every status and priority, some scheduled, one waiting for a parent, two of
    them the worker's; every job as the admin's API sees it."""
    prod, work = team.producer, team.worker
    for n in range(9):
        prod.enqueue(priority=["low", "medium"][n % 2], run_at=f"2099-01-0{n % 3 + 1}T00:00:00Z")
    parent = prod.enqueue(run_at="2099-02-01T00:00:00Z")
    prod.enqueue("report.build", depends_on=[parent["id"]], priority="medium")
    done, failed, running = prod.enqueue(), prod.enqueue(max_retries=0), prod.enqueue()
    for job, outcome in ((done, "complete"), (failed, "fail"), (running, None)):
        assert work.claim()["id"] == job["id"]  # type: ignore[index]
        if outcome:
            work.post(f"/jobs/{job['id']}/{outcome}", {"error": "x"} if outcome == "fail" else {})
    for _ in range(3):
        prod.post(f"/jobs/{prod.enqueue()['id']}/cancel")
    answer = team.admin.get("/jobs?limit=1000").get_json()
    return answer["jobs"]  # type: ignore[no-any-return]


def walk(person: Person, query: dict[str, str]) -> tuple[list[int], list[int]]:
    """Every page from the first with ``Next``, then back with ``Previous``: the ids seen
    going forward, and those seen going back (in page order, pages in reverse)."""
    url = "/ui/jobs?" + urlencode(query)
    forward: list[list[int]] = []
    while url:
        page = soup(person.get(url))
        forward.append([int(a.get_text()[1:]) for a in page.select("#jobs-table tbody td a")])
        nxt = page.select_one(".pager a[rel=next]")
        last = url
        url = str(nxt["href"]) if nxt else ""
    back: list[list[int]] = []
    url = last
    while url:
        page = soup(person.get(url))
        back.insert(0, [int(a.get_text()[1:]) for a in page.select("#jobs-table tbody td a")])
        prev = page.select_one(".pager a[rel=prev]")
        url = str(prev["href"]) if prev else ""
    assert all(len(ids) <= int(query["limit"]) for ids in forward)
    return [i for ids in forward for i in ids], [i for ids in back for i in ids]


@pytest.mark.parametrize(("sort", "status"), ORDERS)
def test_every_order_pages_through_every_job_both_ways(
    team: Team, sort: str, status: str | None
) -> None:
    jobs = queue(team)
    for name, visible in (("boss", jobs), ("prod", jobs), ("work", _held(jobs))):
        query = {"sort": sort, "limit": "3", **({"status": status} if status else {})}
        forward, back = walk(team.person(name), query)
        assert forward == expected(visible, sort, status), (name, sort, status)
        assert back == forward, (name, sort, status)


def _held(jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The worker's: the three jobs it claimed (completed, failed, running)."""
    return [job for job in jobs if job["attempt"] > 0]


def test_the_list_says_how_many_jobs_match(team: Team) -> None:
    jobs = queue(team)
    boss = team.person("boss")
    total = soup(boss.get("/ui/jobs")).find(id="jobs-total").get_text()
    assert total.startswith(f"{len(jobs)} jobs · newest first")
    pending = [job for job in jobs if job["status"] == "pending" and job["priority"] == "medium"]
    page = soup(boss.get("/ui/jobs?status=pending&priority=medium&sort=-priority"))
    assert page.find(id="jobs-total").get_text().startswith(f"{len(pending)} jobs match")
    searched = soup(boss.get(f"/ui/jobs?q={jobs[0]['id']}")).find(id="jobs-total")
    assert searched.get_text().startswith("1 job match")  # counted, not from the counters
    mine = soup(team.person("work").get("/ui/jobs")).find(id="jobs-total")
    assert mine.get_text().startswith("3 jobs")  # the worker's own: the three it claimed


def test_the_page_size_is_in_the_url_and_bounded(team: Team) -> None:
    queue(team)
    boss = team.person("boss")
    page = soup(boss.get("/ui/jobs?limit=5"))
    assert len(page.select("#jobs-table tbody tr")) == 5
    assert page.select_one("#f-limit option[selected]").get_text() == "5"  # not offered: kept
    nxt = page.select_one(".pager a[rel=next]")
    assert nxt is not None and "limit=5" in str(nxt["href"])
    for size in ("0", "201", "x"):
        response = boss.get(f"/ui/jobs?limit={size}")
        assert response.status_code == 422
        assert "limit must be an integer from 1 to 200" in soup(response).get_text()


def test_an_order_no_index_keeps_is_refused_saying_what_to_choose(team: Team) -> None:
    queue(team)
    boss = team.person("boss")
    for query, needs in (
        ("sort=-priority", "pending"),
        ("sort=run_at&status=failed", "pending"),
        ("sort=-updated&status=pending", "cancelled, completed, failed or running"),
    ):
        response = boss.get(f"/ui/jobs?{query}")
        assert response.status_code == 422, query
        text = " ".join(soup(response).find(id="jobs-table").get_text().split())
        assert f"needs the status filter set to {needs}" in text, text
    response = boss.get("/ui/jobs?sort=payload")
    assert response.status_code == 422
    cursor = soup(boss.get("/ui/jobs?limit=2")).select_one(".pager a[rel=next]")["href"]
    mixed = boss.get(str(cursor).replace("limit=2", "limit=2&sort=-priority&status=pending"))
    assert mixed.status_code == 422  # a cursor of the order of creation, in another order
