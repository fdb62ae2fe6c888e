"""W3C trace context carried from an enqueue to the worker that claims the job: read strictly,
so a malformed header is dropped rather than stored and handed on."""

from __future__ import annotations

import re
from dataclasses import dataclass

# traceparent, version 00: version-trace_id-parent_id-flags, lowercase hex only.
_TRACEPARENT = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}")
# tracestate: comma-separated key=value members, at most 32, printable ASCII without spaces
# inside (the W3C grammar's character set, checked loosely: a vendor's value is its own).
_TRACESTATE = re.compile(r"[\x20-\x7e]*")
TRACESTATE_MAX = 512  # characters kept: the length every W3C participant must propagate
_MAX_MEMBERS = 32


@dataclass(frozen=True)
class Trace:
    """The trace context of one enqueue; ``tracestate`` only with a valid ``traceparent``."""

    traceparent: str
    tracestate: str | None = None


def _valid_traceparent(value: str) -> bool:
    """Version 00, a trace id and a parent id that are not all zeros, two hex digits of flags."""
    found = _TRACEPARENT.fullmatch(value)
    return found is not None and set(found[1]) != {"0"} and set(found[2]) != {"0"}


def _kept_tracestate(value: str | None) -> str | None:
    """The tracestate when it is within bounds (else None: it is dropped, not truncated)."""
    if value is None:
        return None
    value = value.strip(" \t")
    if not value or len(value) > TRACESTATE_MAX or not _TRACESTATE.fullmatch(value):
        return None
    members = [member.strip(" \t") for member in value.split(",")]
    if len(members) > _MAX_MEMBERS or not all("=" in member for member in members if member):
        return None
    return value


def read_trace(traceparent: str | None, tracestate: str | None) -> Trace | None:
    """The trace context of a request's headers, or None when there is no valid traceparent
    (the W3C rule: a tracestate without a valid traceparent is discarded too)."""
    if traceparent is None:
        return None
    traceparent = traceparent.strip(" \t")
    if not _valid_traceparent(traceparent):
        return None
    return Trace(traceparent, _kept_tracestate(tracestate))
