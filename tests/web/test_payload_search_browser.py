"""The "Payload contains" field in Debian's Chromium (Playwright): typing a JSON object filters
the jobs as one types, the search goes into the URL, and a bad one is said in the page."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import pytest
from playwright.sync_api import Page, expect

from tests.web import test_browser
from tests.web.conftest import LiveSite
from tests.web.test_browser import sign_in

pytestmark = pytest.mark.browser
expect.set_options(timeout=15_000)
people = test_browser.people  # the browser tests' fixtures: fresh users, a watched page
watched = test_browser.watched
expected_console = test_browser.expected_console


@pytest.fixture
def expected_statuses() -> list[int]:
    return [422]  # the bad search typed on purpose


def test_typing_a_payload_search_filters_the_jobs_and_keeps_it_in_the_url(
    watched: Page, live_site: LiveSite, people: dict[str, Any]
) -> None:
    api = people["admin_api"]
    tag = f"browser-{people['admin']}"  # no other test's jobs carry it
    wanted = [api.enqueue(payload={"tag": tag, "n": n})["id"] for n in range(2)]
    api.enqueue(payload={"tag": tag + "-other"})
    sign_in(watched, live_site, people["admin"], "/ui/jobs")
    needle = json.dumps({"tag": tag})
    watched.get_by_label("Payload contains").fill(needle)
    expect(watched).to_have_url(f"{live_site.url}/ui/jobs?payload={quote(needle, safe='')}")
    rows = watched.locator("#jobs-table tbody td[data-label=Job] a")
    expect(rows).to_have_text([f"#{job_id}" for job_id in reversed(wanted)])
    watched.get_by_label("Payload contains").fill('{"tag": ')
    expect(watched.locator("#jobs-table")).to_contain_text("payload must be a JSON object")
    watched.reload()  # the whole page, as a link to it shows it
    expect(watched.get_by_label("Payload contains")).to_have_value('{"tag": ')
    expect(watched.get_by_label("Payload contains")).to_have_attribute("aria-invalid", "true")
