"""The dashboard's figures: per-status and per-priority counts, oldest pending, per-minute chart."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from app.infra import db
from app.queue.usecases import stats
from app.queue.vocabulary.actors import Actor
from app.queue.vocabulary.states import Role
from app.web.charts import minute_chart
from tests.backends import every_backend  # noqa: F401 (the figures' SQL differs per engine)
from tests.web.conftest import Team, soup


def _tile(page, status: str) -> int:  # type: ignore[no-untyped-def]
    tile = page.select_one(f'a.stat[href="/ui/jobs?status={status}"]')
    return int(tile.select_one(".stat-value").get_text())


def test_counts_follow_visibility(team: Team) -> None:
    team.producer.enqueue(priority="medium")
    team.producer.enqueue()
    team.other_producer.enqueue()
    job = team.worker.claim()
    team.worker.post(f"/jobs/{job['id']}/complete", {})
    mine = soup(team.person("prod").get("/ui/"))
    everything = soup(team.person("boss").get("/ui/"))
    worker = soup(team.person("work").get("/ui/"))
    assert (_tile(mine, "pending"), _tile(mine, "completed")) == (1, 1)
    assert (_tile(everything, "pending"), _tile(everything, "completed")) == (2, 1)
    assert (_tile(worker, "pending"), _tile(worker, "completed")) == (0, 1)
    assert "Nothing is waiting" in worker.find(id="oldest-pending").get_text()
    assert everything.find(id="oldest-pending").get_text().endswith("s")


def test_per_minute_buckets_and_chart(team: Team) -> None:
    done = team.producer.enqueue()
    failed = team.producer.enqueue(max_retries=0)
    team.worker.claim()
    team.worker.post(f"/jobs/{done['id']}/complete", {})
    team.worker.claim()
    team.worker.post(f"/jobs/{failed['id']}/fail", {"error": "x"})
    admin = Actor(id=0, name="operator", role=Role.ADMIN)
    with team.app.app_context(), db.read() as conn:
        now = datetime.now(UTC)
        figures = stats.dashboard(conn, admin, now=now)
        later = stats.dashboard(conn, admin, now=now + timedelta(hours=2))
    assert len(figures.per_minute) == 60
    assert sum(m.completed for m in figures.per_minute) == 1
    assert sum(m.failed for m in figures.per_minute) == 1
    assert sum(m.completed + m.failed for m in later.per_minute) == 0
    assert figures.by_priority == {"critical": 0, "high": 0, "medium": 0, "low": 2}
    chart = minute_chart(figures.per_minute)
    stacked = [bar.completed_height + bar.failed_height for bar in chart.bars]
    assert max(stacked) == chart.plot_height  # the busiest minute fills the plot
    assert sum(1 for height in stacked if height) in (1, 2)  # 2 if a minute turned meanwhile
    empty = minute_chart(later.per_minute)
    assert empty.peak == 0 and all(bar.completed_height == 0 for bar in empty.bars)


def test_chart_is_svg_with_presentation_attributes(team: Team) -> None:
    done = team.producer.enqueue()
    team.worker.claim()
    team.worker.post(f"/jobs/{done['id']}/complete", {})
    page = soup(team.person("prod").get("/ui/"))
    svg = page.select_one("figure.chart svg")
    assert svg["role"] == "img"
    assert svg.find("title") is not None
    assert all(not tag.get("style") for tag in svg.find_all(True))


def test_an_empty_hour_is_a_line_not_a_blank_chart(team: Team) -> None:
    page = soup(team.person("prod").get("/ui/"))
    assert page.select_one("figure.chart") is None
    assert page.find(id="chart-empty").get_text() == "Nothing finished in the last hour."


def test_the_chart_key_names_outcomes_and_the_heading_the_clock(team: Team) -> None:
    done = team.producer.enqueue()
    team.worker.claim()
    team.worker.post(f"/jobs/{done['id']}/complete", {})
    page = soup(team.person("prod").get("/ui/"))
    assert page.select_one("figure.chart figcaption").get_text(" ", strip=True) == (
        "completed failed"
    )
    assert page.find(id="throughput").get_text().endswith("(UTC)")


def test_a_worker_with_pending_jobs_is_not_told_nothing_waits(team: Team) -> None:
    """A job the worker held that backs off is pending for it but not due: say so."""
    job = team.producer.enqueue()
    team.worker.claim()
    team.worker.post(f"/jobs/{job['id']}/fail", {"error": "later", "retry_in": 3600})
    worker = soup(team.person("work").get("/ui/"))
    assert _tile(worker, "pending") == 1
    text = worker.find(id="oldest-pending").get_text()
    assert "Nothing is waiting" not in text
    assert worker.find(id="not-due-scheduled").get_text().startswith("1 waits for its run time")


def test_the_oldest_due_job_leaves_out_paused_types(team: Team) -> None:
    """A paused type's jobs are not claimable: they would make the queue look stuck."""
    team.producer.enqueue("webhook.deliver")
    paused = team.admin.client.patch(
        "/types/webhook.deliver", json={"paused": True}, headers=team.admin.headers()
    )
    assert paused.status_code == 200
    page = soup(team.person("boss").get("/ui/"))
    assert _tile(page, "pending") == 1
    why = page.find(id="not-due")
    assert why.find(id="not-due-paused").get_text().startswith("1 is of a paused type")
    assert "run time" not in why.get_text()  # it is paused, not scheduled
    parent = team.producer.enqueue("report.build", run_at="2099-01-01T00:00:00Z")
    team.producer.enqueue("report.build", depends_on=[parent["id"]])
    team.producer.enqueue("webhook.deliver", depends_on=[parent["id"]])  # paused and waiting
    page = soup(team.person("boss").get("/ui/"))
    assert page.find(id="paused-note") is None  # the list says it
    assert page.find(id="oldest-pending").get_text() == "None is due to run now. Of the 4 pending:"
    items = [" ".join(li.get_text().split()) for li in page.find(id="not-due").find_all("li")]
    assert items == [
        "2 are of a paused type (webhook.deliver): no worker gets them until the type is resumed",
        "1 waits for parent jobs to finish",
        "1 waits for its run time (scheduled, or backing off after a failure)",
    ]
