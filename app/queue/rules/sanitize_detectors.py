"""detect-secrets' provider plugins and keyword detector, as spans of a text to redact.

The plugins are Yelp's maintained catalogue of provider key shapes; upgrading the pinned
version brings its new ones (the test of this module lists every plugin it ships and asks for
each to be used or left out with a reason here). Only their patterns are used: nothing is
verified against a provider, nothing leaves the process.
"""

from __future__ import annotations

import bisect
import re
import sys
import types
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def _standing_in_for(name: str) -> Iterator[None]:
    """While the block imports, an empty module stands in for ``name`` (unless it is imported
    already). detect-secrets' plugins import ``requests`` only to verify secrets with their
    providers, which this module never asks; the real one and its dependencies would be 4.6 MB
    of every server process's memory. Afterwards ``name`` imports as usual."""
    if name in sys.modules:
        yield
        return
    stand_in = types.ModuleType(name, "a stand-in: never used by the patterns read here")
    sys.modules[name] = stand_in
    try:
        yield
    finally:
        if sys.modules.get(name) is stand_in:
            del sys.modules[name]


with _standing_in_for("requests"):
    from detect_secrets.plugins.artifactory import ArtifactoryDetector
    from detect_secrets.plugins.aws import AWSKeyDetector
    from detect_secrets.plugins.azure_storage_key import AzureStorageKeyDetector
    from detect_secrets.plugins.base import RegexBasedDetector
    from detect_secrets.plugins.basic_auth import BasicAuthDetector
    from detect_secrets.plugins.discord import DiscordBotTokenDetector
    from detect_secrets.plugins.github_token import GitHubTokenDetector
    from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
    from detect_secrets.plugins.keyword import DENYLIST, QUOTES_REQUIRED_DENYLIST_REGEX_TO_GROUP
    from detect_secrets.plugins.mailchimp import MailchimpDetector
    from detect_secrets.plugins.sendgrid import SendGridDetector
    from detect_secrets.plugins.slack import SlackDetector
    from detect_secrets.plugins.square_oauth import SquareOAuthDetector
    from detect_secrets.plugins.stripe import StripeDetector
    from detect_secrets.plugins.telegram_token import TelegramBotTokenDetector
    from detect_secrets.plugins.twilio import TwilioKeyDetector

from app.queue.rules.sanitize_names import lines_with  # noqa: E402

Span = tuple[int, int]

# Plugins whose every pattern starts at a literal or a separator and reads a bounded stretch
# from there, so a text costs them linear time.
USED: tuple[type[RegexBasedDetector], ...] = (
    ArtifactoryDetector,
    AWSKeyDetector,
    AzureStorageKeyDetector,
    BasicAuthDetector,
    DiscordBotTokenDetector,
    GitHubTokenDetector,
    GitLabTokenDetector,
    MailchimpDetector,
    SendGridDetector,
    SlackDetector,
    SquareOAuthDetector,
    StripeDetector,
    TelegramBotTokenDetector,
    TwilioKeyDetector,
)
# The others, and why (module name: reason).
LEFT_OUT = {
    "jwt": "an unbounded pattern, quadratic on a run of 'eyJ'; sanitize_shapes' is bounded",
    "openai": "an unbounded pattern, quadratic on a run of 'sk-'; sanitize_shapes has sk-",
    "pypi_token": "an unbounded pattern, quadratic on repeated prefixes; sanitize_shapes has pypi-",
    "npm": "'.+' backtracks over every line with '//'; npm_ and _authToken= are taken already",
    "private_key": "matches the header only; sanitize_shapes removes the whole armoured block",
    "cloudant": "name = value patterns; sanitize_notations takes those names, at less cost",
    "ibm_cloud_iam": "name = value patterns; sanitize_notations takes those names, at less cost",
    "ibm_cos_hmac": "name = value patterns; sanitize_notations takes those names, at less cost",
    "softlayer": "name = value patterns; sanitize_notations takes those names, at less cost",
    "ip_public": "an address is not a secret",
    "high_entropy_strings": "would take commit hashes, digests and ids in plain prose",
    "keyword": "used below, line by line",
}
_PATTERNS: tuple[re.Pattern[str], ...] = tuple(
    pattern
    for plugin in USED
    for pattern in plugin.denylist  # type: ignore[attr-defined]  # a class attribute
)
# Where a token found by a plugin may go on (the plugins' patterns may stop short of its end):
# the whole secret goes, not a prefix.
_TOKEN_TAIL = re.compile(r"(?:[\w\-+/]|\.(?=[\w-])){0,8192}+=*+")
_KEYWORD = re.compile("|".join(DENYLIST))  # lower case, as lines_with reads
# What starts every span the plugins find (``sanitize_screen``); the keyword detector reads only
# the lines whose lower case holds one of its keywords, each of which holds one of HINTS.
TRIGGERS = _PATTERNS
# The keyword detector's patterns backtrack within a line: longer lines are left to
# sanitize_notations, which reads every line.
_KEYWORD_LINE_LIMIT = 512


def plugin_spans(text: str) -> Iterator[Span]:
    """Secrets that detect-secrets' provider plugins recognise, each to the end of its token."""
    for pattern in _PATTERNS:
        for match in pattern.finditer(text):
            groups = [g for g in range(1, (pattern.groups or 0) + 1) if match.group(g)]
            for start, end in [match.span(g) for g in groups] or [match.span()]:
                start, end = _trimmed(match.string, start, end)
                if start < end:
                    yield start, _TOKEN_TAIL.match(text, end).end()  # type: ignore[union-attr]


def _trimmed(text: str, start: int, end: int) -> Span:
    """The span without the separators some patterns take in (a space or quote before) and
    without a URL's scheme and host (a webhook's secret is its path)."""
    scheme = text.find("://", start, end)
    if scheme != -1:
        path = text.find("/", scheme + 3, end)
        start = path + 1 if path != -1 else start
    while start < end and not (text[start].isalnum() or text[start] in "_-"):
        start += 1
    while end > start and not (text[end - 1].isalnum() or text[end - 1] in "_-=/+"):
        end -= 1
    return start, end


def keyword_spans(text: str, found: list[Span]) -> Iterator[Span]:
    """Values that detect-secrets' keyword detector finds (``"x" == password``,
    ``secret("x")``, ``private_key "x";``), on the lines that hold one of its keywords, a
    quote (each of its patterns takes a quoted value) and none of the spans ``found`` already
    (sorted): it reads what the other rules' notations leave out."""
    starts = [start for start, _ in found]
    for stretch_start, stretch_end in lines_with(text, _KEYWORD):
        start = stretch_start
        for line in text[stretch_start:stretch_end].split("\n"):
            index = bisect.bisect_left(starts, start)
            untouched = index == len(starts) or starts[index] > start + len(line)
            quoted = any(quote in line for quote in "\"'`")
            if untouched and quoted and len(line) <= _KEYWORD_LINE_LIMIT:
                for pattern, group in QUOTES_REQUIRED_DENYLIST_REGEX_TO_GROUP.items():
                    match = pattern.search(line)
                    if match is not None and match.group(group):
                        yield start + match.start(group), start + match.end(group)
            start += len(line) + 1
