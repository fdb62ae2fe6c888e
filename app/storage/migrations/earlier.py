"""An earlier migration's module, for a later migration that rebuilds what it wrote (a trigger's
statements, a list of allowed values): Alembic's scripts are files, not importable by name."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

VERSIONS = Path(__file__).with_name("versions")


def migration(name: str) -> ModuleType:
    """The module of the script ``name`` (``"0011_statement_counters.py"``), loaded afresh."""
    path = VERSIONS / name
    spec = importlib.util.spec_from_file_location(f"queuelog_migration_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
