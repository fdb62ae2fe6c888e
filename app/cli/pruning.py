"""Pruning in short transactions for the ``--older-than`` commands (jobs and audit rows), and the
durations those commands read: shared by ``app/cli/commands.py`` and ``app/cli/audit.py``."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime, timedelta

import click
from flask import current_app
from sqlalchemy import Connection

from app.infra import db
from app.queue.vocabulary.timeutil import utcnow

_DURATION = re.compile(r"(\d{1,9})([smhdw])")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}


def parse_duration(text: str) -> timedelta:
    """``90s``, ``15m``, ``12h``, ``7d`` or ``2w`` as a timedelta."""
    match = _DURATION.fullmatch(text.strip())
    if match is None:
        raise click.BadParameter("use a number and a unit: 90s, 15m, 12h, 7d or 2w")
    try:
        return timedelta(seconds=int(match[1]) * _UNIT_SECONDS[match[2]])
    except OverflowError:
        raise click.BadParameter(f"{text} is too long an age") from None


def prune_in_batches(
    older_than: str, delete_batch: Callable[[Connection, datetime, int], int]
) -> int:
    """Delete what ``delete_batch`` selects older than the ``--older-than`` age, one short
    transaction per batch (claims and writes go between); returns how many rows went."""
    age = parse_duration(older_than)
    try:
        cutoff = utcnow() - age
    except OverflowError:
        raise click.BadParameter(
            "that age reaches before year 1", param_hint="--older-than"
        ) from None
    batch = int(current_app.config["PRUNE_BATCH_SIZE"])
    total = 0
    while True:
        with db.transaction() as conn:
            count = delete_batch(conn, cutoff, batch)
        total += count
        if count < batch:
            return total
