"""The types page's busiest partitions in Debian's Chromium, at 1280 and 375 px: the figures
show, a partition name of the longest kind wraps inside its card, nothing scrolls sideways."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.web import test_browser
from tests.web.conftest import LiveSite
from tests.web.test_browser import sign_in

pytestmark = pytest.mark.browser
expect.set_options(timeout=15_000)
people = test_browser.people  # the browser tests' fixtures: fresh users, a watched page
watched = test_browser.watched
expected_statuses = test_browser.expected_statuses
expected_console = test_browser.expected_console

LONGEST = "Z" * 64  # a partition name of the longest kind, with no place to break


@pytest.mark.parametrize("width", [1280, 375])
def test_the_busiest_partitions_show_and_fit(
    watched: Page, live_site: LiveSite, people: dict[str, Any], width: int
) -> None:
    tenant = f"tenant-{width}"
    items = [{"type": "webhook.deliver", "partition": LONGEST}] * 40
    items += [{"type": "webhook.deliver", "partition": tenant}] * 3
    response = people["producer_api"].post("/jobs/batch", {"jobs": items})
    assert response.status_code == 201, response.get_data()[:300]
    assert people["worker_api"].claim(types=["webhook.deliver"]) is not None

    watched.set_viewport_size({"width": width, "height": 900})
    sign_in(watched, live_site, people["admin"], "/ui/types/")
    card = watched.locator(
        "article.job-type", has=watched.get_by_role("heading", name="webhook.deliver")
    )
    section = card.locator(".type-partitions")
    expect(section.get_by_role("heading", name="Busiest partitions")).to_be_visible()
    due = section.get_by_role("list", name="Due jobs of webhook.deliver per partition")
    expect(due.get_by_role("link", name=LONGEST)).to_be_visible()
    expect(due.get_by_role("link", name=tenant)).to_be_visible()
    running = section.get_by_role("list", name="Running jobs of webhook.deliver per partition")
    expect(running.locator("li").first).to_be_visible()
    overflow = watched.evaluate("document.documentElement.scrollWidth > window.innerWidth")
    assert not overflow, "the page scrolls sideways"
    box, inner = card.bounding_box(), due.bounding_box()
    assert box is not None and inner is not None
    assert inner["x"] + inner["width"] <= box["x"] + box["width"] + 0.5, (box, inner)
