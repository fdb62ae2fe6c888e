"""Redact secrets from worker texts (errors, progress messages) before they are stored.

Every pattern starts at a literal or behind a negative look-behind and uses possessive
quantifiers, so each character is looked at a bounded number of times: a megabyte of hostile
text sanitizes in linear time.
"""

from __future__ import annotations

import re
from collections.abc import Callable

MARKER = "[REDACTED]"
PATH_MARKER = "[PATH]"
TRUNCATED = "…[truncated]"

_PRIVATE_KEY_HEADER = re.compile(r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY-----")
_TOKEN_CHARS = r"A-Za-z0-9\-._~+/"  # noqa: S105 (a character class)
# Suffixes of environment-style names that hold secrets: PGPASSWORD=, DB_SECRET=, GH_TOKEN=.
_ENV_SECRET_SUFFIXES = r"PASSWORD|PASSWD|PASS|PWD|SECRET|TOKEN|KEY|CREDENTIALS?"  # noqa: S105
_CREDENTIAL_NAMES = (
    r"password|passwd|pwd|secret|client[_-]?secret|token|api[_-]?key|apikey|access[_-]?key"
    r"|secret[_-]?key|aws_secret_access_key|private[_-]?key|auth[_-]?token"
)
# A URL's authority and what follows, to the next space or quote (bounded): the user
# information ends at its last "@", since a password may hold "/" or "@" itself.
_URL_TAIL = re.compile(r"://([^\s\"'<>]{1,256}+)")


def _redact_userinfo(match: re.Match[str]) -> str:
    """scheme://user:password@host keeps only ``://[REDACTED]@host`` (no colon: no password)."""
    tail = match.group(1)
    at = tail.rfind("@")
    if at == -1 or ":" not in tail[:at]:
        return match.group(0)
    return f"://{MARKER}@{tail[at + 1 :]}"


# AWS secret access keys have no prefix: 40 characters of base64 standing alone. Requiring
# upper case, lower case and a digit spares hex digests (git and SHA-1 hashes) of that length.
_BARE_AWS_SECRET = re.compile(r"(?<![A-Za-z0-9/+=])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])")


def _redact_aws_secret(match: re.Match[str]) -> str:
    key = match.group(0)
    mixed = any(c.isupper() for c in key) and any(c.islower() for c in key)
    return MARKER if mixed and any(c.isdigit() for c in key) else key


# A value: quoted (to the closing quote or the line's end) or bare (to a space or a quote; a
# password may hold "&", ";" or ",", so those do not end it).
_VALUE = r"(?:\"[^\"\n]{0,1024}+\"?|'[^'\n]{0,1024}+'?|[^\s\"']{1,1024}+)"
Replacement = str | Callable[[re.Match[str]], str]
_PATTERNS: tuple[tuple[re.Pattern[str], Replacement], ...] = (
    (_URL_TAIL, _redact_userinfo),
    # JSON Web Tokens
    (
        re.compile(
            r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{1,8192}+\.[A-Za-z0-9_-]{1,8192}+"
            r"(?:\.[A-Za-z0-9_-]{0,8192}+)?"
        ),
        MARKER,
    ),
    # Slack incoming webhooks carry their secret in the path
    (
        re.compile(
            r"(?i)(https://hooks\.slack\.com/)(?:services|workflows|triggers)/[\w/-]{1,512}+"
        ),
        rf"\1{MARKER}",
    ),
    # Well-known token formats: queuelog's own (ql_), GitHub, Stripe, Slack, Google API keys
    (
        re.compile(
            r"(?<![A-Za-z0-9_-])(?:ql_[A-Za-z0-9_-]{16,256}+"
            r"|gh[pousr]_[A-Za-z0-9]{20,255}+|github_pat_[A-Za-z0-9_]{20,255}+"
            r"|(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{8,255}+|whsec_[A-Za-z0-9]{8,255}+"
            r"|xox[abeoprs]-[A-Za-z0-9-]{8,255}+|xapp-[A-Za-z0-9-]{8,255}+"
            r"|AIza[A-Za-z0-9_-]{30,40}+"
            # OpenAI (sk-proj-, sk-svcacct-, sk-...), GitLab, npm and PyPI tokens
            r"|sk-[A-Za-z0-9_-]{20,255}+|glpat-[A-Za-z0-9_-]{20,255}+"
            r"|npm_[A-Za-z0-9]{30,255}+|pypi-[A-Za-z0-9_-]{16,255}+)"
        ),
        MARKER,
    ),
    # Pre-signed S3 URLs: the signature and the credential scope
    (
        re.compile(r"(?i)(x-amz-(?:signature|credential|security-token)=)[^\s&\"'#]{1,4096}+"),
        rf"\1{MARKER}",
    ),
    # Environment-style assignments: PGPASSWORD=..., DB_SECRET="...", and the same names as
    # keys of a dumped mapping: environ({'PGPASSWORD': '...'}) (the name is bounded, so a word
    # start costs at most 64 steps per suffix)
    (
        re.compile(
            rf"(?<![A-Za-z0-9_])([A-Za-z][A-Za-z0-9_]{{0,63}}(?:{_ENV_SECRET_SUFFIXES})"
            rf"(?:=|[\"']\s{{0,5}}+[:=]\s{{0,5}}+)){_VALUE}",
            re.IGNORECASE,
        ),
        rf"\1{MARKER}",
    ),
    # Cookie headers: every cookie to the line's end (or the closing quote of a dumped dict)
    (
        re.compile(
            r"(?i)(?<![A-Za-z0-9-])((?:set-)?cookie[\"']?\s{0,5}+:\s{0,5}+[\"']?)"
            r"[^\n\"']{1,4096}+"
        ),
        rf"\1{MARKER}",
    ),
    # curl -u user:password, --user user:password (the user name is kept)
    (
        re.compile(
            r"(?<![\w-])((?:-u|--user)(?:\s{1,5}+|=)[\"']?[^\s:\"']{0,256}+:)[^\s\"']{1,1024}+"
        ),
        rf"\1{MARKER}",
    ),
    # Authorization headers (also quoted, as in a dumped header dict) and bearer tokens
    (
        re.compile(
            r"(?i)(?<![A-Za-z0-9])(authorization[\"']?\s{0,5}+[:=]\s{0,5}+[\"']?)[^\s,;\"']{1,64}+"
            rf"(?:\s{{1,5}}+[{_TOKEN_CHARS}]{{1,8192}}+=*+)?"
        ),
        rf"\1{MARKER}",
    ),
    (
        re.compile(rf"(?i)(?<![A-Za-z0-9])(bearer\s{{1,10}}+)[{_TOKEN_CHARS}]{{1,8192}}+=*+"),
        rf"\1{MARKER}",
    ),
    # AWS access key ids
    (
        re.compile(r"(?<![A-Z0-9])(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}+"),
        MARKER,
    ),
    # "password": "a quoted passphrase", secret='two words' (to the closing quote or line end)
    (
        re.compile(
            rf"(?i)(?<![A-Za-z0-9])((?:{_CREDENTIAL_NAMES})[\"']?\s{{0,5}}+[=:]\s{{0,5}}+)"
            r"(?:\"[^\"\n]{1,1024}+\"?|'[^'\n]{1,1024}+'?)"
        ),
        rf'\1"{MARKER}"',
    ),
    # password=..., "token": "...", api_key: ...
    (
        re.compile(
            rf"(?i)(?<![A-Za-z0-9])((?:{_CREDENTIAL_NAMES})[\"']?\s{{0,5}}+[=:]\s{{0,5}}+[\"']?)"
            r"[^\s\"']{1,1024}+"
        ),
        rf"\1{MARKER}",
    ),
    (_BARE_AWS_SECRET, _redact_aws_secret),
    # absolute POSIX paths (/home/app/config.py) and Windows paths (C:\app\config.py)
    (
        re.compile(r"(?<![\w.~/:-])/(?:[\w.@+-]{1,255}+/){1,64}+[\w.@+-]{0,255}+"),
        PATH_MARKER,
    ),
    (
        re.compile(
            r"(?<![\w])[A-Za-z]:\\(?:[^\\\s:*?\"<>|]{1,255}+\\){0,64}+[^\\\s:*?\"<>|]{0,255}+"
        ),
        PATH_MARKER,
    ),
)


def sanitize_error(text: str, max_bytes: int = 4096) -> str:
    """Return ``text`` with secrets and absolute paths redacted, capped at ``max_bytes``."""
    text = _clean_characters(text)
    text = _redact_private_keys(text)
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return _truncate(text, max_bytes)


# ANSI escape sequences: CSI (colours, cursor moves), OSC (titles, hyperlinks) and 2-byte ones.
_ANSI = re.compile(
    r"\x1b\[[0-?]{0,64}+[ -/]{0,16}+[@-~]?"
    r"|\x1b\][^\x07\x1b]{0,4096}+(?:\x07|\x1b\\)?"
    r"|\x1b[@-Z\\-_]?"
)
# C0 and C1 controls except tab and newline, and the bidi overrides, isolates and marks that
# make text display in another order than it is stored (Trojan Source, CVE-2021-42574).
_INVISIBLE = dict.fromkeys(
    [
        *(c for c in range(0x20) if c not in (0x09, 0x0A)),
        *range(0x7F, 0xA0),
        *range(0x202A, 0x202F),
        *range(0x2066, 0x206A),
        # Direction marks (ALM, LRM, RLM) and zero-width characters, which also hide a token
        # from the patterns by splitting it.
        0x061C,
        *range(0x200B, 0x2010),
        *range(0x2060, 0x2065),
        0xFEFF,
    ]
)


def _clean_characters(text: str) -> str:
    """Drop terminal escapes, control and bidi characters, NUL and lone surrogates (a database
    may refuse NUL, browsers mangle surrogates, and a terminal would obey the escapes)."""
    text = text.replace("\x00", "\ufffd")
    text = _ANSI.sub("", text).translate(_INVISIBLE)
    return text.encode("utf-8", "replace").decode("utf-8")


def _redact_private_keys(text: str) -> str:
    """Replace PEM private-key blocks (an unterminated block is redacted to the end)."""
    parts: list[str] = []
    position = 0
    while (match := _PRIVATE_KEY_HEADER.search(text, position)) is not None:
        parts.append(text[position : match.start()])
        parts.append(MARKER)
        end = text.find("-----END", match.end())
        if end == -1:
            position = len(text)
            break
        close = text.find("-----", end + len("-----END"))
        position = len(text) if close == -1 else close + len("-----")
    parts.append(text[position:])
    return "".join(parts)


def _truncate(text: str, max_bytes: int) -> str:
    """Cap ``text`` at ``max_bytes`` UTF-8 bytes, cutting on a character boundary."""
    encoded = text.encode("utf-8")
    if len(encoded) <= max_bytes:
        return text
    room = max(max_bytes - len(TRUNCATED.encode("utf-8")), 0)
    return encoded[:room].decode("utf-8", "ignore") + TRUNCATED
