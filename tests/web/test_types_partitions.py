"""The job types page shows each type's busiest partitions, running and due, the others summed,
each named partition linking to its jobs; a type without partitioned jobs shows none of it."""

from __future__ import annotations

from collections import Counter
from typing import Any
from urllib.parse import parse_qs, urlsplit

from app.queue.usecases.partition_figures import BUSIEST
from tests.backends import every_backend  # noqa: F401 (run on both engines)
from tests.web.conftest import Team
from tests.web.test_pages import assert_clean_markup
from tests.web.test_types_page import card


def enqueue(team: Team, job_type: str, partitions: list[str | None]) -> None:
    items: list[dict[str, Any]] = [
        {"type": job_type, **({"partition": p} if p else {})} for p in partitions
    ]
    response = team.producer.post("/jobs/batch", {"jobs": items})
    assert response.status_code == 201, response.get_data()[:300]


def figures(section: Any, label: str) -> list[str]:
    """The items of one figure (Running, Due) as shown."""
    term = next(dt for dt in section.select("dt") if dt.get_text(strip=True) == label)
    items = term.find_next_sibling("dd").select("li")
    return [li.get_text(" ", strip=True) for li in items]


def by_partition(team: Team, status: str) -> list[str]:
    """The report.build jobs of ``status`` per partition, as the page words them, busiest
    first (ties by name, jobs without a partition first)."""
    jobs = team.admin.get(f"/jobs?type=report.build&status={status}&limit=100").get_json()
    counted = Counter(job["partition"] for job in jobs["jobs"])
    order = sorted(counted.items(), key=lambda item: (-item[1], item[0] or ""))
    shown = [f"{name or 'no partition'} {n}" for name, n in order[:BUSIEST]]
    rest = sum(n for _, n in order[BUSIEST:])
    return shown + ([f"others {rest}"] if rest else [])


def test_cards_show_the_busiest_partitions(team: Team) -> None:
    # acme 5 jobs, globex 4, then five partitions of one job each, and two without a partition
    names = ["acme"] * 5 + ["globex"] * 4 + [f"t{i}" for i in range(5)]
    enqueue(team, "report.build", [*names, None, None])
    for _ in range(3):  # fair turns: one job each of three partitions
        assert team.worker.claim(types=["report.build"]) is not None
    section = card(team, 1).select_one(".type-partitions")
    assert section is not None
    assert section.select_one("h3").get_text(strip=True) == "Busiest partitions"
    running = figures(section, "Running")
    assert running == by_partition(team, "running") and len(running) == 3
    due = figures(section, "Due")
    assert due == by_partition(team, "pending")
    assert len(due) == BUSIEST + 1 and due[0].startswith("acme ") and due[-1].startswith("others")
    link = section.select_one("a[href*='partition=acme']")
    query = parse_qs(urlsplit(link["href"]).query)
    assert query["type"] == ["report.build"] and query["partition"] == ["acme"]
    # email.send has no jobs, webhook.deliver none in a partition: no section
    enqueue(team, "webhook.deliver", [None])
    assert card(team, 0).select_one(".type-partitions") is None
    assert card(team, 2).select_one(".type-partitions") is None


def test_partition_names_are_escaped_and_the_page_stays_clean(team: Team) -> None:
    enqueue(team, "email.send", ["a:b.c_d-" + "x" * 56])
    page = team.person("boss").get("/ui/types/")
    section = assert_clean_markup(page).select_one("#type-0 .type-partitions")
    assert section is not None
    assert figures(section, "Due") == ["a:b.c_d-" + "x" * 56 + " 1"]
    assert figures(section, "Running") == ["none"]
