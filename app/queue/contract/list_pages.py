"""The jobs page's query string: the API's list filters, an order (``orders``) and a page
size bounded for people."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import Field, PlainValidator

from app.queue.contract.job_requests import ListQuery
from app.queue.contract.request_model import parse_query, refuse
from app.queue.rules.settings import QueueSettings
from app.queue.vocabulary.orders import NEWEST_FIRST, Sort

PAGE_SIZES = (25, 50, 100, 200)  # what the page's select offers
DEFAULT_PAGE_SIZE = PAGE_SIZES[0]


def _page_size(value: Any) -> int:
    if not isinstance(value, str) or not value.isascii() or not value.isdigit():
        value = ""
    if not value or not 1 <= int(value) <= PAGE_SIZES[-1]:
        raise refuse(f"must be an integer from 1 to {PAGE_SIZES[-1]}")
    return int(value)


def _sort(value: Any) -> Sort:
    try:
        return Sort.parse(value if isinstance(value, str) else "")
    except ValueError as exc:
        raise refuse(str(exc)) from None


PageSize = Annotated[int, PlainValidator(_page_size), Field(description="Jobs per page.")]
SortField = Annotated[Sort, PlainValidator(_sort), Field(description="e.g. -created, run_at")]


class PageQuery(ListQuery):
    """``GET /ui/jobs``: the list filters, ``sort`` (``-created`` by default) and ``limit``."""

    limit: PageSize = DEFAULT_PAGE_SIZE
    sort: SortField = NEWEST_FIRST

    def order(self) -> Sort:
        """The order the query asks for."""
        return self.sort

    @classmethod
    def from_args(cls, args: Mapping[str, str], settings: QueueSettings) -> PageQuery:
        """Validate a query string (see ``parse_query``)."""
        return parse_query(cls, args, settings)
