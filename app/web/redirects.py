"""Where a page may send the browser next: only paths on this site (no open redirects)."""

from __future__ import annotations

from urllib.parse import urlsplit


def safe_next(value: str | None, default: str = "/ui/") -> str:
    """``value`` if it is a path on this site, else ``default``."""
    if not value or not value.startswith("/") or value.startswith(("//", "/\\")):
        return default
    if any(ord(char) < 0x20 or char == "\\" for char in value):
        return default
    parts = urlsplit(value)
    if parts.scheme or parts.netloc:
        return default
    return value
