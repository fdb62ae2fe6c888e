"""URL converters."""

from __future__ import annotations

from werkzeug.routing import BaseConverter


class JobIdConverter(BaseConverter):
    """A job id: 1 to 18 digits, so it always fits a 64-bit column (longer ids are 404s)."""

    regex = r"[0-9]{1,18}"

    def to_python(self, value: str) -> int:
        return int(value)

    def to_url(self, value: object) -> str:
        return str(value)
