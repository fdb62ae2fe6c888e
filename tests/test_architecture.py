"""The house's rules that the code keeps by construction, checked on the source: each rule in
one place."""

from __future__ import annotations

import re
from pathlib import Path

from devservers.servers import REPO

APP = REPO / "app"
TEMPLATES = REPO / "templates"


def _sources(root: Path, pattern: str) -> dict[str, str]:
    return {str(path.relative_to(REPO)): path.read_text() for path in sorted(root.rglob(pattern))}


def test_error_texts_are_redacted_in_one_place_per_front_end() -> None:
    """Answers: ``app/api/respond.py`` leaves out what only admins see (the response models
    mark it). Pages: the context processor asks once, templates show error texts only under
    ``sees_errors``. No route, page module or builder decides it again."""
    deciding = re.compile(r"include_error|as_seen_by|sees_errors|SEE_ERRORS")
    found = {name for name, text in _sources(APP, "*.py").items() if deciding.search(text)}
    assert found == {
        "app/api/respond.py",  # the answers
        "app/web/views.py",  # the pages
        "app/queue/rules/policy.py",  # the rule
        "app/queue/usecases/stats.py",  # the dashboard reads failures only for those who see them
    }
    for name, text in _sources(TEMPLATES, "*.html").items():
        assert "SEE_ERRORS" not in text, name
        for shown in re.finditer(r"\{\{[^}]*\b(?:job|event)\.error\b", text):
            before = text[: shown.start()]
            assert before.rfind("sees_errors") > before.rfind("{% endif %}"), (name, shown[0])


def test_each_route_module_owns_its_blueprint() -> None:
    """One way to register routes: a module's routes hang on its own ``bp``, which the API's
    or the pages' blueprint (or the factory) lists; no module adds routes to another's
    blueprint, and the factory imports nothing for its side effects."""
    route = re.compile(r"^@bp\.(?:route|get|post|put|patch|delete)\(", re.M)
    for name, text in _sources(APP, "*.py").items():
        if route.search(text):
            assert re.search(r"^bp = Blueprint\(", text, re.M), name
    assert "noqa: F401" not in (APP / "__init__.py").read_text()
