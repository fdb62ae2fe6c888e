"""detect-secrets' plugins: each used or left out for a reason, each finding its shape whole."""

from __future__ import annotations

import pkgutil

import detect_secrets.plugins

from app.queue.rules.sanitize import MARKER, sanitize_error
from app.queue.rules.sanitize_detectors import LEFT_OUT, USED


def test_every_plugin_of_the_pinned_version_is_used_or_left_out_for_a_reason() -> None:
    shipped = {
        module.name
        for module in pkgutil.iter_modules(detect_secrets.plugins.__path__)
        if module.name not in ("base", "__init__")
    }
    used = {plugin.__module__.rsplit(".", 1)[1] for plugin in USED}
    assert used.isdisjoint(LEFT_OUT)
    assert used | set(LEFT_OUT) == shipped  # a new plugin after an upgrade: decide here


def test_a_plugin_finds_its_token_and_the_whole_token_goes() -> None:
    # Square's plugin knows 43 characters after the prefix; the token goes to its end.
    token = "sq0csp-" + "Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2Yz3Ab4Cd5" + "TAIL9"
    assert sanitize_error(f"square said no to {token} today") == f"square said no to {MARKER} today"


def test_the_keyword_detector_finds_a_comparison() -> None:
    assert sanitize_error('if "Kw1dEt4cT7" == db_password:') == f'if "{MARKER}" == db_password:'
