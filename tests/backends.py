"""Import ``every_backend`` into a test module (or conftest) to run its tests on both engines."""

from __future__ import annotations

import pytest

BACKENDS = ["sqlite", pytest.param("postgresql", marks=pytest.mark.pg)]


@pytest.fixture(name="backend", params=BACKENDS)
def every_backend(request: pytest.FixtureRequest) -> str:
    """The test runs on a SQLite file and on the throwaway PostgreSQL server."""
    return request.param  # type: ignore[no-any-return]
