"""Geometry of the dashboard's per-minute bar chart, drawn as SVG by the template.

The SVG stretches to the page width (preserveAspectRatio="none"), so it holds no text; the
time labels are HTML under it and stay readable on a phone.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.queue.usecases.stats import MinuteCount

WIDTH = 600
HEIGHT = 140
BASELINE = 1  # room for the axis line under the bars


@dataclass(frozen=True)
class Bar:
    """One minute: a completed segment stacked under a failed one."""

    x: float
    width: float
    completed_y: float
    completed_height: float
    failed_y: float
    failed_height: float
    label: str


@dataclass(frozen=True)
class Chart:
    width: int
    height: int
    plot_height: int
    peak: int
    bars: list[Bar]
    ticks: list[str]
    completed: int
    failed: int


def minute_chart(minutes: list[MinuteCount]) -> Chart:
    """Scale the counts to the plot: the busiest minute fills the height."""
    plot = HEIGHT - BASELINE
    peak = max((m.completed + m.failed for m in minutes), default=0)
    slot = WIDTH / max(len(minutes), 1)
    bars = []
    ticks: list[str] = []
    for i, minute in enumerate(minutes):
        scale = plot / peak if peak else 0
        done_h = minute.completed * scale
        fail_h = minute.failed * scale
        bars.append(
            Bar(
                x=round(i * slot + 1, 2),
                width=round(slot - 2, 2),
                completed_y=round(plot - done_h, 2),
                completed_height=round(done_h, 2),
                failed_y=round(plot - done_h - fail_h, 2),
                failed_height=round(fail_h, 2),
                label=f"{minute.start:%H:%M} UTC: {minute.completed} completed, "
                f"{minute.failed} failed",
            )
        )
        if i % 15 == 0 or i == len(minutes) - 1:
            ticks.append(f"{minute.start:%H:%M}")
    return Chart(
        width=WIDTH,
        height=HEIGHT,
        plot_height=plot,
        peak=peak,
        bars=bars,
        ticks=ticks,
        completed=sum(m.completed for m in minutes),
        failed=sum(m.failed for m in minutes),
    )
