"""Secrets known by their shape alone: armoured key blocks, provider tokens, URL credentials.

Every pattern starts at a literal or behind a negative look-behind and uses possessive
quantifiers, so each character is looked at a bounded number of times.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

Span = tuple[int, int]

# Armour of any kind (PEM, OpenSSH, PGP, SSH2, age) except the kinds that are public by design.
_ARMOUR_BEGIN = re.compile(r"-{4,5}+ ?BEGIN ([A-Z0-9 ]{1,64}+)-{4,5}+")
_ARMOUR_END = re.compile(r"-{4,5}+ ?END [A-Z0-9 ]{0,64}+-{4,5}+")
_PUBLIC_ARMOUR = frozenset(
    {
        "CERTIFICATE", "TRUSTED CERTIFICATE", "CERTIFICATE REQUEST", "NEW CERTIFICATE REQUEST",
        "X509 CRL", "PUBLIC KEY", "RSA PUBLIC KEY", "SSH2 PUBLIC KEY", "PGP PUBLIC KEY BLOCK",
        "PGP SIGNATURE", "PKCS7", "CMS", "DH PARAMETERS", "EC PARAMETERS",
    }
)  # fmt: skip
# A PuTTY key file, from its first line to its MAC.
_PUTTY = re.compile(
    r"PuTTY-User-Key-File-\d{1,2}+:[^\n]{0,256}+"
    r"(?:\n(?!Private-MAC)[^\n]{0,256}+){0,512}+(?:\nPrivate-MAC:[^\n]{0,256}+)?"
)


def armoured_blocks(text: str) -> Iterator[Span]:
    """Armoured private material, header to footer (an unterminated block to the end)."""
    position = 0
    footers_left = True
    while (begin := _ARMOUR_BEGIN.search(text, position)) is not None:
        end_match = _ARMOUR_END.search(text, begin.end()) if footers_left else None
        footers_left = end_match is not None
        public = begin.group(1).strip() in _PUBLIC_ARMOUR
        end = end_match.end() if end_match is not None else len(text)
        if not public:
            yield begin.start(), end
        position = end if end_match is not None or not public else begin.end()
    for match in _PUTTY.finditer(text):
        yield match.span()


# Provider tokens: the prefix says what the rest is, so the whole token goes. A table, one
# provider a line, for the shapes detect-secrets' plugins do not know or know in part (Stripe's
# live keys but not its test keys, Slack's xoxb- but not xoxe- or xapp-).
_PREFIXED = [
    r"ql_[\w-]{16,256}+",  # queuelog's own API tokens
    # GitHub (detect-secrets knows 36 characters exactly: a token cut short is still one)
    r"gh[pousr]_[A-Za-z0-9_]{20,255}+|github_pat_\w{20,255}+",
    r"(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{8,255}+|whsec_[A-Za-z0-9]{8,255}+",  # Stripe
    # Slack
    r"xox[a-z]-[A-Za-z0-9-]{8,255}+|xapp-[A-Za-z0-9-]{8,255}+|xoxe\.xox[a-z]-[\w-]{8,255}+",
    r"AIza[\w-]{30,40}+|ya29\.[\w.-]{20,4096}+|1//0[\w-]{30,512}+|GOCSPX-[\w-]{20,64}+",  # Google
    r"SG\.[\w-]{16,32}+\.[\w-]{16,64}+",  # SendGrid
    r"(?:AC|SK)[0-9a-fA-F]{32}+:[A-Za-z0-9]{32}+",  # Twilio key SID and its secret
    r"sk-[\w-]{20,255}+",  # OpenAI, Anthropic
    r"npm_[A-Za-z0-9]{30,255}+|pypi-[\w-]{16,255}+",  # npm, PyPI
    r"hv[sbr]\.[\w-]{20,512}+",  # HashiCorp Vault
    r"do[opr]_v1_[a-f0-9]{32,128}+",  # DigitalOcean
    r"shp(?:at|ss|ca|pa)_[a-fA-F0-9]{16,64}+",  # Shopify
    r"hf_[A-Za-z0-9]{30,64}+",  # Hugging Face
    r"ATATT3[\w=-]{32,512}+",  # Atlassian
    r"dapi[a-f0-9]{32}+(?:-\d)?",  # Databricks
    r"lin_api_[A-Za-z0-9]{32,64}+|PMAK-[a-f0-9-]{32,128}+",  # Linear, Postman
    r"NRAK-[A-Z0-9]{27}+|glsa_[\w-]{32,128}+|glc_[A-Za-z0-9+/=]{32,512}+",  # New Relic, Grafana
    r"sntry[su]_[\w=+/-]{32,512}+|pul-[a-f0-9]{40}+|HRKU-[\w-]{32,128}+",  # Sentry, Pulumi, Heroku
    r"dp\.(?:pt|st|sa|ct|scim|audit)\.[\w-]{32,128}+",  # Doppler
    r"(?:fo1|sbp|r8|gsk|ntn)_[\w-]{20,255}+",  # Fly, Supabase, Replicate, Groq, Notion
    r"AGE-SECRET-KEY-1[0-9A-Z]{58}+",  # age
    r"key-[0-9a-f]{32}+",  # Mailgun
    r"[\w~.-]{3}\dQ~[\w~.-]{31,34}+",  # Azure AD client secrets
    # AWS key ids
    r"(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}+",
    # JSON Web Tokens (and JWE: five parts)
    r"eyJ[\w-]{1,8192}+\.[\w-]{1,8192}+(?:\.[\w-]{0,8192}+){0,3}+",
]
_TOKENS = re.compile(rf"(?<![\w-])(?:{'|'.join(_PREFIXED)})")
_AFTER_PREFIX = [
    # Bearer tokens in prose and headers, and credentials in webhook paths
    r"(?i:bearer)\s{1,10}+([\w\-.~+/]{1,8192}+=*+)",
    r"(?i:https://hooks\.slack\.com/)((?:services|workflows|triggers)/[\w/-]{1,512}+)",
    r"(?i:https://(?:\w{1,32}\.)?discord(?:app)?\.com/api/webhooks/)(\d{1,32}+/[\w-]{1,256}+)",
]
_TOKEN_LIKE = re.compile(r"[\d._~+/=-]|.[A-Z]")
_PREFIXED_SECRETS = re.compile(rf"(?<![A-Za-z0-9])(?:{'|'.join(_AFTER_PREFIX)})")
# AWS secret access keys have no prefix: 40 characters of base64 standing alone. Requiring
# upper case, lower case and a digit spares hex digests (git and SHA-1 hashes) of that length.
_BARE_AWS_SECRET = re.compile(r"(?<![A-Za-z0-9/+=])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])")
# A URL's authority and what follows, to the next space or quote (bounded): the user
# information ends at its last "@", since a password may hold "/" or "@" itself.
_URL_TAIL = re.compile(r"://([^\s\"'<>]{1,256}+)")


def provider_tokens(text: str) -> Iterator[Span]:
    """Tokens whose shape names their provider, bearer tokens and webhook credentials."""
    for match in _TOKENS.finditer(text):
        yield match.span()
    for match in _PREFIXED_SECRETS.finditer(text):
        group = next(group for group in range(1, 4) if match.group(group))
        # "Bearer token missing": a bearer token holds a digit, a capital or punctuation.
        if group > 1 or _TOKEN_LIKE.search(match.group(1)):
            yield match.span(group)
    for match in _BARE_AWS_SECRET.finditer(text):
        key = match.group()
        if all(any(test(c) for c in key) for test in (str.isupper, str.islower, str.isdigit)):
            yield match.span()


def url_credentials(text: str) -> Iterator[Span]:
    """scheme://user:password@host: the user information (no colon there: no password)."""
    for match in _URL_TAIL.finditer(text):
        at = match.group(1).rfind("@")
        if at != -1 and ":" in match.group(1)[:at]:
            yield match.start(1), match.start(1) + at


# absolute POSIX paths (/home/app/config.py) and Windows paths (C:\app\config.py)
_PATHS = (
    re.compile(r"(?<![\w.~/:-])/(?:[\w.@+-]{1,255}+/){1,64}+[\w.@+-]{0,255}+"),
    re.compile(r"(?<![\w])[A-Za-z]:\\(?:[^\\\s:*?\"<>|]{1,255}+\\){0,64}+[^\\\s:*?\"<>|]{0,255}+"),
)


# The patterns whose matches start every span this module finds (the others read on from there):
# a text in which none of them can match holds none of these secrets (``sanitize_screen``).
# Paths first: most texts that hold anything hold one, and the screen stops at the first need met.
TRIGGERS = (
    *_PATHS, _URL_TAIL, _ARMOUR_BEGIN, _PUTTY, _TOKENS, _PREFIXED_SECRETS, _BARE_AWS_SECRET
)  # fmt: skip


def absolute_paths(text: str) -> Iterator[Span]:
    """Absolute file paths, which tell where and as whom the worker runs."""
    for pattern in _PATHS:
        for match in pattern.finditer(text):
            yield match.span()
