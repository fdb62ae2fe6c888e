"""Error redaction: secrets out, then a 4 KiB cap, bounded work on hostile input."""

from __future__ import annotations

import time

import pytest

from app.queue.rules.sanitize import LOOKAHEAD, MARKER, PATH_MARKER, TRUNCATED, sanitize_error

# (text, the secret in it): every leak reported so far, one row each. A new variant is a row.
EARLIER = [
    ("connect failed: postgresql://app:s3cretpw@db:5432/prod", "s3cretpw"),
    ("redis://:redispw@cache:6379/0 refused", "redispw"),
    ("amqp://guest:guestpw@rabbit:5672/", "guestpw"),
    ("fetch https://alice:pa%40ss@example.com/x failed", "pa%40ss"),
    ("dsn postgres://u:p@ss@host/db", "p@ss"),
    ("Authorization: Bearer abc.def-ghi_jkl", "abc.def-ghi_jkl"),
    ("authorization=Basic dXNlcjpwYXNz", "dXNlcjpwYXNz"),
    ("sent bearer tok_live_12345 upstream", "tok_live_12345"),
    ("jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sigSIGsig rejected", "sigSIGsig"),
    ("key AKIAIOSFODNN7EXAMPLE denied", "AKIAIOSFODNN7EXAMPLE"),
    ("temp key ASIAIOSFODNN7EXAMPLE denied", "ASIAIOSFODNN7EXAMPLE"),
    ("password=hunter22 rejected", "hunter22"),
    ("PASSWORD: 'Hunter22'", "Hunter22"),
    ('{"password": "hunter22", "user": "bob"}', "hunter22"),
    ('{"password": "correct horse battery staple"}', "horse battery"),
    ("secret_key = 'two words'", "words"),
    ('token="unterminated quoted value', "quoted value"),
    ("secret=topsecret&next=1", "topsecret"),
    ("token=tkn123;", "tkn123"),
    ("api_key=ak-999", "ak-999"),
    ("api-key: ak-999", "ak-999"),
    ("apikey=ak-999", "ak-999"),
    ("client_secret=cs-1", "cs-1"),
    ("aws_secret_access_key=wJalrXUtnFEMI/K7MDENG/bPxRfiCY", "wJalrXUtnFEMI"),
    ("Server=db;Password=S3cret!;", "S3cret!"),
    (
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEAsecret\n-----END RSA PRIVATE KEY-----",
        "MIIEpAIBAAKCAQEAsecret",
    ),
    ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk (cut off", "b3BlbnNzaC1rZXk"),
    ("-----BEGIN PRIVATE KEY-----\nMIIEvAIBADANBg\n-----END PRIVATE KEY-----", "MIIEvAIB"),
    ('File "/home/deploy/app/jobs.py", line 3', "/home/deploy"),
    ("open /etc/queuelog/secret.toml: denied", "/etc/queuelog"),
    (r"C:\Users\bob\secrets.txt not found", "bob"),
    ("PGPASSWORD=hunter22 psql -h db", "hunter22"),
    ("env DB_SECRET=s3cr3t not accepted", "s3cr3t"),
    ("GH_TOKEN=abc123def", "abc123def"),
    ("STRIPE_API_KEY=sk-abc", "sk-abc"),
    ("export SMTP_PASSWORD=pa55word", "pa55word"),
    ("AWS_SESSION_TOKEN=FwoGZXIvYXdzE", "FwoGZXIvYXdzE"),
]
# Issue #26 (security, third pass): variants that leaked past the patterns above.
THIRD_PASS = [
    ('PGPASSWORD="Quoted SecretPW" psql -h db', "SecretPW"),
    ("PGPASSWORD='Quoted SecretPW' psql -h db", "SecretPW"),
    ("environ({'PGPASSWORD': 'envSecretPW', 'HOME': '/root'})", "envSecretPW"),
    ("password=Tr0ub4dor&3xyzSECRETTAIL", "SECRETTAIL"),
    ("password=Tr0ub4dor;3xyzSECRETTAIL", "SECRETTAIL"),
    ("password=Tr0ub4dor,3xyzSECRETTAIL", "SECRETTAIL"),
    ("PGPASSWORD=Tr0ub4dor&3xyzSECRETTAIL psql", "SECRETTAIL"),
    ("postgres://u:pa/ssSLASHPW@db/x", "SLASHPW"),
    ("Cookie: session=eyJfZnJlc2giOmZhbHNlfQ.Z2xv.c2lnbmF0dXJlCOOKIE; theme=dark", "theme=dark"),
    ("Cookie: session=CookieSecret123; other=CookieTail456", "CookieTail456"),
    ("{'Cookie': 'session=CookieSecret123'}", "CookieSecret123"),
    ("Set-Cookie: session=CookieSecret123; HttpOnly", "CookieSecret123"),
    ("aws secret wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY rejected", "wJalrXUtnFEMI"),
    ("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "bPxRfiCY"),
    ("openai sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789_-ab 401", "AbCdEfGhIjKlMnOp"),
    ("sk-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789abcdef", "AbCdEfGhIjKlMnOp"),
    ("gitlab glpat-AbCdEfGhIj0123456789 denied", "AbCdEfGhIj0123456789"),
    ("npm_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789 expired", "AbCdEfGhIjKlMnOpQr"),
    ("pypi-AgEIcHlwaS5vcmcCJGFiY2RlZmdoLWlqa2wtbW5vcA upload refused", "AgEIcHlwaS5vcmcCJG"),
    ("curl -u deploy:curlSecretPW https://x.example", "curlSecretPW"),
    ("curl --user deploy:curlSecretPW https://x.example", "curlSecretPW"),
    ("curl --user=deploy:curlSecretPW https://x.example", "curlSecretPW"),
    ("g\u200fhp_" + "A1b2C3d4E5" * 4, "A1b2C3d4E5"),
    ("key AKIA\u061cIOSFODNN7EXAMPLE denied", "IOSFODNN7EXAMPLE"),
]
PGP_BLOCK = (
    "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBGX1pgpSECRETbody0Zx9\n=Ab1c\n"
    "-----END PGP PRIVATE KEY BLOCK-----"
)
# Issue #41 (security, fourth pass): notations the patterns above missed.
FOURTH_PASS = [
    (PGP_BLOCK, "pgpSECRETbody"),
    ('user = {:password=>"rubySecretPW", :name=>"bob"}', "rubySecretPW"),
    ("$db = ['password' => 'phpSecretPW', 'host' => 'db'];", "phpSecretPW"),
    ("docker login --password dockerSecretPW registry.example.com", "dockerSecretPW"),
    ("mysql -u root -pmysqlSecretPW -h db prod", "mysqlSecretPW"),
    (
        "GET https://a.blob.core.windows.net/c/b?sv=2022-11-02&sp=r&sig=azSasSig%2BSecret%3D",
        "azSasSig",
    ),
    (
        "SG.abcdefghijklmnopqrstuv.ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopq rejected",
        "ABCDEFGHIJKLMNOP",
    ),
    ("token ya29.a0AfH6SMBgoogleSecretToken0123456789 expired", "a0AfH6SMBgoogle"),
    (
        "auth SK0123456789abcdef0123456789abcdef:twilioSecretAbCdEfGhIjKlMnOpQrSt failed",
        "twilioSecret",
    ),
    ("GPG_PASSPHRASE=gpgSecretPW gpg --batch", "gpgSecretPW"),
    ("SECRET_KEY_BASE=railsSecretPW rails s", "railsSecretPW"),
    ("password\uff1dfullWidthSecretPW rejected", "fullWidthSecretPW"),
]


@pytest.mark.parametrize(("text", "secret"), [*EARLIER, *THIRD_PASS, *FOURTH_PASS])
def test_secrets_are_redacted(text: str, secret: str) -> None:
    clean = sanitize_error(text)
    assert secret not in clean
    assert MARKER in clean or PATH_MARKER in clean


def test_context_around_secrets_is_kept() -> None:
    clean = sanitize_error("login failed for bob: password=hunter22 (attempt 3)")
    assert clean == f"login failed for bob: password={MARKER} (attempt 3)"
    dsn = sanitize_error("cannot reach postgresql://app:pw@db.internal:5432/prod")
    assert dsn == f"cannot reach postgresql://{MARKER}@db.internal:5432/prod"
    path = sanitize_error('File "/srv/app/worker.py", line 12, in run')
    assert path == f'File "{PATH_MARKER}", line 12, in run'


@pytest.mark.parametrize(
    "text",
    [
        "division by zero",
        "HTTP 503 from https://api.example.com/v1/send",
        "ratio 1/2 exceeded",
        "timeout after 30s",
        "KeyError: 'password'",
        "tokenizer failed",
        "",
    ],
)
def test_harmless_text_is_unchanged(text: str) -> None:
    assert sanitize_error(text) == text


def test_nul_and_lone_surrogates_are_replaced() -> None:
    clean = sanitize_error("a\x00b\ud800c")
    assert "\x00" not in clean
    clean.encode("utf-8")  # strict: would raise on a lone surrogate


def test_text_is_capped_at_max_bytes_on_a_character_boundary() -> None:
    clean = sanitize_error("é" * 5000, 4096)
    encoded = clean.encode("utf-8")
    assert len(encoded) <= 4096
    assert clean.endswith(TRUNCATED)
    assert set(clean.removesuffix(TRUNCATED)) == {"é"}
    assert sanitize_error("x" * 4096) == "x" * 4096
    assert sanitize_error("x" * 4097).endswith(TRUNCATED)
    assert len(sanitize_error("x" * 100, 10).encode()) <= 10 + len(TRUNCATED.encode())


@pytest.mark.parametrize(
    ("secret", "piece"),
    [
        ("AKIAIOSFODNN7EXAMPLE", "AKIAIOSF"),
        ("postgres://admin:s3cretpassw0rd@db.example.com/prod", "s3cr"),
        ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl", "eyJhbGci"),
        ("-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEAkey", "MIIEpAIB"),
    ],
)
def test_redaction_runs_before_truncation(secret: str, piece: str) -> None:
    room = 4096 - len(TRUNCATED.encode())
    # Put the cut inside the secret: truncating first would leave a piece of it behind.
    for offset in range(2, len(secret) - 2):
        clean = sanitize_error("x" * (room - offset - 1) + " " + secret + " after", 4096)
        assert len(clean.encode()) <= 4096
        assert piece not in clean, (offset, clean[-40:])


HOSTILE = {
    "plain": "a" * 1_000_000,
    "dsn prefixes": "://" * 340_000,
    "dsn no at": "://" + "a:" * 499_000,
    "jwt starts": "eyJ" * 333_000,
    "jwt dots": "eyJa." * 200_000,
    "bearer words": "bearer " * 142_000,
    "authorization": "authorization: " * 66_000,
    "password keys": "password=" * 111_000,
    "password no value": "password" * 125_000,
    "aws": "AKIA" * 250_000,
    "slashes": "/" * 1_000_000,
    "path segments": "/a" * 500_000,
    "windows": "C:\\" * 333_000,
    "pem headers": "-----BEGIN RSA PRIVATE KEY-----" * 32_000,
    "pem ends": "-----BEGIN PRIVATE KEY-----" + "-----END" * 120_000,
    "open quotes": 'password="' + "a" * 1_000_000,
    "quoted keys": 'token="' * 150_000,
    "mixed": ("password=x://a:b@" + "/tmp/x " + "Bearer eyJa.b ") * 30_000,
    "env names": ("A" * 63 + "_" + " ") * 15_000,
    "env assignments": "DB_SECRET=" * 100_000,
    "env long name": "A" * 1_000_000 + "_TOKEN=x",
    "token prefixes": "ghp_ ql_ sk_live_ xoxb- AIza " * 35_000,
    "github pats": "github_pat_" * 90_000,
    "amz": "X-Amz-Signature=" * 62_500,
    "slack hooks": "https://hooks.slack.com/services/" * 30_000,
    "ansi csi": "\x1b[" * 500_000,
    "ansi osc": "\x1b]" + "a" * 1_000_000,
    "controls": "\x01\u202e\x9b" * 333_000,
    "marks": "a\u200f\u061c" * 333_000,
    "url tails": "://a:b/c" * 125_000,
    "url no at": "://" + "a:/" * 333_000,
    "quoted env": 'PGPASSWORD="' * 80_000,
    "env dict keys": "{'PGPASSWORD': " * 67_000,
    "cookies": "Cookie: " * 125_000,
    "curl users": "-u a:" * 200_000,
    "base64 runs": "Ab1/" * 250_000,
    "forty char words": ("Ab1" + "x" * 37 + " ") * 25_000,
    "new token prefixes": "sk-proj- glpat- npm_ pypi- " * 37_000,
    "armour begins": "-----BEGIN PGP PRIVATE KEY BLOCK-----" * 27_000,
    "public armour": "-----BEGIN CERTIFICATE-----" * 37_000,
    "putty": "PuTTY-User-Key-File-3:\n" * 43_000,
    "ruby arrows": ":password=>" * 91_000,
    "php arrows": "'password' => " * 72_000,
    "flags": "--password " * 91_000,
    "mysql flags": "mysql -p" * 125_000,
    "mysql no flag": "mysql " + "a " * 500_000,
    "tool logins": "docker login " * 77_000,
    "names without values": "db_password " * 84_000,
    "spaced names": "password " * 112_000,
    "calls": "setPassword(" * 84_000,
    "pairs": "('password', " * 77_000,
    "xml elements": "<password>" * 100_000,
    "xml pairs": 'name="password" value=' * 46_000,
    "escaped json": '\\"password\\":\\"' * 62_000,
    "full-width": "password\uff1d" * 111_000,
    "look-alikes": "p\u0430ssw\u043erd\ua789" * 111_000,
    "one long line of keywords": "passwordsecrettokenkey" * 46_000,
    "keyword lines": ("password " * 56 + "\n") * 2_000,
    "authorization lines": "Authorization: " + "Basic " * 166_000,
    "config set": "config set " * 91_000,
    "eyJ runs": "eyJhbGciOi" * 100_000,
}
# Hostile text may cost a few times what plain text of the same size costs, never more: a
# quadratic pattern would take hundreds of times longer on a megabyte. Costs are this thread's
# CPU time, so a busy machine that leaves the test waiting for a core does not count.
HOSTILE_FACTOR = 10


def _sanitized_in_cpu_seconds(text: str) -> tuple[str, float]:
    """``sanitize_error(text)`` and the CPU time this thread spent on it."""
    started = time.thread_time()
    clean = sanitize_error(text)
    return clean, time.thread_time() - started


@pytest.fixture(scope="module")
def plain_seconds() -> float:
    """The CPU time a megabyte of harmless text takes on this machine (best of three)."""
    return min(_sanitized_in_cpu_seconds("a" * 1_000_000)[1] for _ in range(3))


@pytest.mark.parametrize("text", HOSTILE.values(), ids=HOSTILE.keys())
def test_a_megabyte_of_hostile_text_is_sanitized_and_bounded(
    text: str, plain_seconds: float
) -> None:
    assert len(text) >= 900_000
    clean, seconds = _sanitized_in_cpu_seconds(text)
    assert seconds < HOSTILE_FACTOR * plain_seconds + 0.5
    assert len(clean.encode("utf-8")) <= 4096


GITHUB_PAT = "github_pat_11ABCDEFG0" + "x" * 70
SECRETS = {
    "queuelog token": "ql_" + "Zm9vYmFyYmF6cXV4cXV1eDEyMzQ1Njc4OTAxMjM0NTY",
    "github classic": "ghp_" + "A1b2C3d4E5" * 4,
    "github oauth": "gho_" + "A1b2C3d4E5" * 4,
    "github server": "ghs_" + "A1b2C3d4E5" * 4,
    "github fine-grained": GITHUB_PAT,
    "stripe live": "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc",
    "stripe test": "sk_test_" + "4eC39HqLyjWDarjtT1zdp7dc",
    "stripe restricted": "rk_live_" + "4eC39HqLyjWDarjtT1zdp7dc",
    "slack bot": "xoxb-" + "123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
    "slack user": "xoxp-" + "123456789012-1234567890123-1234567890123-abcdef",
    "google api key": "AIza" + "SyA-1234567890abcdefghijklmnopqrstu",
}


@pytest.mark.parametrize("secret", SECRETS.values(), ids=SECRETS.keys())
def test_sanitizer_redacts_well_known_token_formats(secret: str) -> None:
    for text in (f"call failed with {secret} (401)", f"token '{secret}'", secret):
        clean = sanitize_error(text)
        assert secret[6:] not in clean, clean
        assert MARKER in clean


def test_sanitizer_redacts_github_tokens() -> None:
    clean = sanitize_error(f"git push https://github.com/o/r ghp_{'a1B2' * 9} {GITHUB_PAT}")
    assert "a1B2" not in clean
    assert "11ABCDEFG0" not in clean
    assert clean.startswith("git push https://github.com/o/r ")


def test_sanitizer_redacts_slack_webhook_urls() -> None:
    url = "https://hooks.slack.com/services/T0001/B0002/XXXXXXXXXXXXXXXXXXXXXXXX"
    clean = sanitize_error(f"POST {url} answered 404")
    assert clean == f"POST https://hooks.slack.com/{MARKER} answered 404"


@pytest.mark.parametrize(
    "text",
    [
        "Authorization: Basic dXNlcjpwYXNzd29yZA==",
        "{'Authorization': 'Basic dXNlcjpwYXNzd29yZA=='}",
        '{"authorization":"Basic dXNlcjpwYXNzd29yZA=="}',
    ],
)
def test_sanitizer_redacts_basic_authorization(text: str) -> None:
    assert "dXNlcjpwYXNzd29yZA" not in sanitize_error(text)


def test_sanitizer_redacts_presigned_url_signatures() -> None:
    url = (
        "https://bucket.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256"
        "&X-Amz-Credential=AKIAEXAMPLE%2F20260101%2Fus-east-1%2Fs3%2Faws4_request"
        "&X-Amz-Signature=fe5f80f77d5fa3beca038a248ff027d0445342fe2855ddc963176630326f1024"
    )
    clean = sanitize_error(f"GET {url} 403")
    assert "fe5f80f77d5fa3be" not in clean
    assert "20260101" not in clean
    assert "X-Amz-Algorithm=AWS4-HMAC-SHA256" in clean


def test_sanitizer_strips_ansi_bidi_and_control_characters() -> None:
    text = "\x1b[31mred\x1b[0m \x1b]8;;http://evil\x07link\x1b]8;;\x07 a\u202eb\u2066c\u2069"
    clean = sanitize_error(text + "\x07\x08\r\x85\x9b done\tok\nnext")
    assert clean == "red link abc done\tok\nnext"


@pytest.mark.parametrize("mark", ["\u200e", "\u200f", "\u061c", "\u200b", "\ufeff"])
def test_sanitizer_strips_direction_marks_and_zero_width_characters(mark: str) -> None:
    assert sanitize_error(f"a{mark}b") == "ab"


def test_new_patterns_keep_the_context_around_the_secret() -> None:
    assert sanitize_error('PGPASSWORD="a b" psql -h db') == f"PGPASSWORD={MARKER} psql -h db"
    assert sanitize_error("curl -u deploy:pw https://x") == f"curl -u deploy:{MARKER} https://x"
    assert sanitize_error("postgres://u:pa/ss@db/x") == f"postgres://{MARKER}@db/x"
    assert sanitize_error("Cookie: a=1; b=2\nnext") == f"Cookie: {MARKER}\nnext"


@pytest.mark.parametrize(
    "text",
    [
        "commit 3f786850e387550fdab836ed7e6dc881de23001b fixed it",  # a git hash: 40 hex
        "see https://example.com/users/profile, then retry",
        "ssh://git@github.com/o/r.git refused",  # a user but no password
        "the task-scheduler-configuration-value is wrong",
        "sort -u input.txt",
    ],
)
def test_lookalikes_of_the_new_patterns_are_unchanged(text: str) -> None:
    assert sanitize_error(text) == text


def test_a_token_cut_where_reading_stops_is_dropped_not_kept() -> None:
    # A long key block shrinks to a marker, which brings text from near the end of what is
    # read into the kept 4 KiB: a token cut there is too short to be recognised.
    block = "-----BEGIN PRIVATE KEY-----\n" + "A" * 17_000 + "\n-----END PRIVATE KEY-----"
    head = f"start {block} middle "
    filler = "y" * (4096 + LOOKAHEAD - len(head) - 12)
    clean = sanitize_error(head + filler + " ghp_A1b2C3d4E5" + "A1b2C3d4E5" * 3 + " end")
    assert "A1b2" not in clean
    assert clean.startswith(f"start {MARKER} middle ")
    assert clean.endswith(TRUNCATED)
    assert len(clean.encode()) <= 4096
