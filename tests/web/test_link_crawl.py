"""Every link a signed-in person is shown opens: a crawl of the pages as each role over a queue
with jobs in every status, a group, a spawned child, a schedule and tokens, on a server with
and without SECRETS_KEY. A link to a page the viewer may not open (a group of someone else's,
the parent of a child it never held, a second factor the server cannot store) is not shown."""

from __future__ import annotations

from collections import deque
from typing import Any
from urllib.parse import urldefrag, urljoin, urlsplit

import pytest
from flask import Flask

from tests.builders import PASSWORD, Api, make_token, make_user
from tests.web.conftest import Person, Team, login, sign_in, soup

MAX_PAGES = 400  # the populated queue has a few dozen pages per role; a loop would hit this


def crawl(person: Person, start: str = "/ui/") -> dict[str, int]:
    """Every same-site page reachable from ``start`` through links, with its status."""
    seen: dict[str, int] = {}
    queue = deque([start])
    while queue:
        path = queue.popleft()
        if path in seen:
            continue
        assert len(seen) < MAX_PAGES, "the crawl does not end: links keep making new pages"
        response = person.get(path)
        seen[path] = response.status_code
        if response.status_code != 200 or response.mimetype != "text/html":
            continue
        for anchor in soup(response).select("a[href]"):
            target = urldefrag(urljoin(path, str(anchor["href"])))[0]
            if target and not urlsplit(target).netloc and not target.startswith("/static/"):
                queue.append(target)
    return seen


def populate(team: Team) -> dict[str, Any]:
    """Jobs in every status, a group with a member a worker holds, a child held by a worker
    that never held its parent, a schedule; every user has a token."""
    prod, work, boss = team.producer, team.worker, team.admin
    other_worker = Api(team.worker.client, None)
    make_user(team.app, "work2", "worker", password=PASSWORD)
    other_worker.token = make_token(team.app, "work2")
    done = prod.enqueue()
    assert work.claim()["id"] == done["id"]  # type: ignore[index]
    work.post(f"/jobs/{done['id']}/complete", {"result": {"ok": True}})
    failed = prod.enqueue(max_retries=0)
    assert work.claim()["id"] == failed["id"]  # type: ignore[index]
    work.post(f"/jobs/{failed['id']}/fail", {"error": "disk full"})
    cancelled = prod.enqueue()
    prod.post(f"/jobs/{cancelled['id']}/cancel")
    batch = prod.post(
        "/jobs/batch",
        {"jobs": [{"type": "email.send"}] * 2, "group": {"name": "mailing"}},
    ).get_json()
    assert work.claim()["id"] == batch["jobs"][0]["id"]  # type: ignore[index]
    parent = prod.enqueue("report.build")
    held = work.claim(types=["report.build"])
    assert held is not None and held["id"] == parent["id"]
    child = work.post(
        f"/jobs/{parent['id']}/children",
        {"attempt": held["attempt"], "jobs": [{"type": "webhook.deliver"}]},
    ).get_json()["jobs"][0]
    assert other_worker.claim(types=["webhook.deliver"])["id"] == child["id"]  # type: ignore[index]
    prod.enqueue(run_at="2099-01-01T00:00:00Z")
    schedule = {"name": "nightly", "cron": "0 2 * * *", "type": "report.build"}
    assert boss.post("/schedules", schedule).status_code == 201
    member = batch["jobs"][0]["id"]
    return {
        "group": batch["group_id"],
        "member": member,
        "parent": parent["id"],
        "child": child["id"],
    }


def dead_links(team: Team, names: list[str]) -> dict[str, dict[str, int]]:
    """Per person, the pages the crawl reached that answered an error."""
    found = {}
    for name in names:
        pages = crawl(sign_in(team.app, name))
        assert len(pages) > 5, pages  # the crawl went somewhere
        found[name] = {path: status for path, status in pages.items() if status >= 400}
    return found


PEOPLE = ["boss", "prod", "work", "work2"]


def test_every_link_each_role_is_shown_opens(team: Team) -> None:
    populate(team)
    assert dead_links(team, PEOPLE) == {name: {} for name in PEOPLE}


def test_a_worker_is_not_linked_to_a_group_or_parent_it_may_not_open(team: Team) -> None:
    made = populate(team)
    work2 = sign_in(team.app, "work2")
    page = soup(work2.get(f"/ui/jobs/{made['child']}"))
    assert page.find("a", href=f"/ui/jobs/{made['parent']}") is None
    assert f"#{made['parent']}" in page.find(id="job-parent").get_text()  # named, not linked
    assert work2.get(f"/ui/jobs/{made['parent']}").status_code == 404
    work = sign_in(team.app, "work")
    page = soup(work.get(f"/ui/jobs/{made['member']}"))
    assert f"group #{made['group']}" in page.find(id="job-group").get_text()  # named, not linked
    assert page.select("a[href^='/ui/groups/']") == []
    assert work.get(f"/ui/groups/{made['group']}").status_code == 404
    owner = soup(sign_in(team.app, "prod").get(f"/ui/jobs/{made['member']}"))
    assert owner.select("a[href^='/ui/groups/']")  # its producer opens it


def test_a_monitor_cannot_sign_in_to_pages_and_is_told_why(team: Team) -> None:
    make_user(team.app, "watcher", "monitor", password=PASSWORD)
    client = team.app.test_client()
    response = login(client, "watcher")
    assert response.status_code == 403
    assert "reads /metrics" in soup(response).find(class_="flash").get_text()
    assert client.get("/ui/").status_code == 302  # not signed in


class TestWithoutSecretsKey:
    """A production server without SECRETS_KEY cannot store a second factor."""

    @pytest.fixture
    def app_config(self) -> dict[str, Any]:
        return {"SECRETS_KEY": None, "PRODUCTION": True}

    def test_every_link_each_role_is_shown_opens(self, team: Team) -> None:
        populate(team)
        assert dead_links(team, PEOPLE) == {name: {} for name in PEOPLE}

    def test_admins_are_told_what_is_missing(self, team: Team, app: Flask) -> None:
        for name in ("boss", "prod", "work"):
            page = soup(sign_in(app, name).get("/ui/"))
            assert page.find("a", href="/ui/account/second-factor") is None
            notice = page.find(id="secrets-key-missing")
            assert (notice is not None) == (name == "boss"), name
        assert "SECRETS_KEY" in notice_text(app)


def notice_text(app: Flask) -> str:
    page = soup(sign_in(app, "boss").get("/ui/"))
    return " ".join(page.find(id="secrets-key-missing").get_text().split())
