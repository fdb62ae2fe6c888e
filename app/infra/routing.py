"""URL converters."""

from __future__ import annotations

from werkzeug.routing import BaseConverter


class RowIdConverter(BaseConverter):
    """A row id (job, token): 1 to 18 digits, so it always fits a 64-bit column (longer ids
    are 404s, never an overflow)."""

    regex = r"[0-9]{1,18}"

    def to_python(self, value: str) -> int:
        return int(value)

    def to_url(self, value: object) -> str:
        return str(value)
