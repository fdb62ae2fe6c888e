"""Payload containment (``payload @> needle``) as one SQL construct, ``PayloadContains``, that each
dialect compiles its own way: PostgreSQL with ``@>`` on jsonb, SQLite (which has no ``@>``) with
an exact check over ``json_each`` behind a prefilter that its expression indexes serve."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import Boolean, ColumnElement


class PayloadContains(ColumnElement[bool]):
    """True where the JSON document ``document`` contains ``needle`` (an object's canonical JSON
    text, ``app.queue.contract.payload_search``), with PostgreSQL's ``@>`` meaning. Compiled by
    ``app.queue.sql.dialects.postgresql`` and ``app.queue.sql.dialects.sqlite_json``."""

    type = Boolean()
    inherit_cache = False  # its SQL depends on the needle's shape: never reused from a cache

    def __init__(self, document: ColumnElement[Any], needle: str) -> None:
        self.document = document
        self.needle = needle

    @property
    def needle_object(self) -> dict[str, Any]:
        """The needle, decoded."""
        decoded: dict[str, Any] = json.loads(self.needle)
        return decoded

    @property
    def _from_objects(self) -> list[Any]:
        return self.document._from_objects  # the table the document is a column of
