"""Packaging beyond ``pyproject.toml``: the pages' ``templates/`` and ``static/`` folders stay at
the top of the repository but ship inside the app package (``app/templates``, ``app/static``), so
an installed queuelog serves its pages; ``create_app`` looks there first."""

from setuptools import find_packages, setup

setup(
    packages=[*find_packages(include=["app", "app.*"]), "app.templates", "app.static"],
    package_dir={"app.templates": "templates", "app.static": "static"},
)
