"""The house's rules that the code keeps by construction, checked on the source: each rule in
one place."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections import defaultdict
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


def test_the_import_contracts_hold() -> None:
    """pyproject.toml's import-linter contracts: the layers, no Flask in the queue and the
    storage, front ends through the use cases (``make lint`` runs the same)."""
    linter = Path(sys.executable).with_name("lint-imports")
    run = subprocess.run(
        [linter, "--no-cache", "--no-logo"], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "0 broken" in run.stdout


def _modules() -> set[str]:
    return {
        ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
        for path in APP.rglob("*.py")
    }


def _module_imports() -> dict[str, set[str]]:
    """Each module of app/ that app/, tests/, bench/ or devservers/ import as a module, with
    the names they bind it to (``from app.queue.sql import jobs as jobs_sql``: jobs_sql)."""
    modules, names = _modules(), defaultdict(set)
    for folder in ("app", "tests", "bench", "devservers"):
        for path in (REPO / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    for alias in node.names:
                        if (module := f"{node.module}.{alias.name}") in modules:
                            names[module].add(alias.asname or alias.name)
                elif isinstance(node, ast.Import):
                    for alias in node.names:
                        if alias.name in modules and alias.asname:
                            names[alias.name].add(alias.asname)
    return names


def test_each_module_is_imported_under_one_name_and_no_name_means_two_modules() -> None:
    names = _module_imports()
    assert {module: found for module, found in names.items() if len(found) > 1} == {}
    meaning = defaultdict(set)
    for module, found in names.items():
        for name in found:
            meaning[name].add(module)
    assert {name: found for name, found in meaning.items() if len(found) > 1} == {}
    statements = {f"app.queue.sql.{path.stem}" for path in (APP / "queue" / "sql").glob("[!_]*.py")}
    for module in statements & set(names):  # SQL modules read as SQL wherever they are used
        assert names[module] == {f"{module.rsplit('.', 1)[1]}_sql"}, module


def test_no_two_classes_of_the_app_share_a_name() -> None:
    defined = defaultdict(list)
    for path in APP.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                defined[node.name].append(str(path.relative_to(REPO)))
    assert {name: where for name, where in defined.items() if len(where) > 1} == {}


def test_no_module_of_the_app_is_over_400_lines() -> None:
    long = {
        name: text.count("\n")
        for name, text in _sources(APP, "*.py").items()
        if text.count("\n") > 400
    }
    assert long == {}
