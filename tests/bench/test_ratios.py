"""The bench prints a ratio to a peer only when the peer ran near its reference: a trickle
ratio too, judged by the peer's bulk figure of the same run."""

from __future__ import annotations

import pytest

from bench.e2e import line
from bench.references import REFERENCES


def test_no_trickle_ratio_when_the_peer_s_bulk_ran_far_below(
    capsys: pytest.CaptureFixture[str],
) -> None:
    line("trickle", [200.0], [100.0], "jobs/s", "huey", peer_ran=False)
    printed = capsys.readouterr().out
    assert "ratio not reported" in printed and "2.00" not in printed

    line("trickle", [200.0], [100.0], "jobs/s", "huey")
    assert "ratio  2.00" in capsys.readouterr().out


def test_bulk_ratio_against_the_reference(capsys: pytest.CaptureFixture[str]) -> None:
    reference = REFERENCES["huey FULL"].jobs_per_s
    line("bulk", [reference], [reference / 4], "jobs/s", "huey", reference="huey FULL")
    assert "ratio not reported" in capsys.readouterr().out
    line("bulk", [reference], [reference], "jobs/s", "huey", reference="huey FULL")
    assert "ratio  1.00" in capsys.readouterr().out
