"""Bulk previews and operations are served by indexes on SQLite, as the listing is: no table
scans, whatever the filter."""

from __future__ import annotations

from datetime import timedelta

import pytest
from flask import Flask

from app.audit.actions import Origin
from app.queue.usecases import bulk_runs
from app.queue.usecases.bulk import Selection, Verb
from app.queue.vocabulary.jobs import JobFilters
from tests.harness import T0, make_queue
from tests.queue.sql.test_query_plans import assert_index_served
from tests.queue.usecases.test_bulk import failed_job


@pytest.mark.parametrize(
    ("verb", "filters"),
    [(Verb.CANCEL, {}), (Verb.RETRY, {"type": "email.send"}), (Verb.DELETE, {"status": "failed"})],
)
def test_previews_and_operations_read_indexes_only(
    app: Flask, verb: Verb, filters: dict[str, str]
) -> None:
    queue = make_queue(app)
    for _ in range(3):
        failed_job(queue)
        queue.enqueue(delay_seconds=3600)  # not due: the next failed_job claims its own
    selection = Selection(verb, JobFilters(**filters), created_before=T0 + timedelta(days=1))
    with app.app_context():

        def operation() -> object:
            count = bulk_runs.preview(queue.admin, selection).count
            assert count > 0
            return bulk_runs.apply(
                queue.admin,
                selection,
                reason="why",
                expect_count=count,
                origin=Origin(queue.admin.name),
            )

        assert_index_served(app, operation)
