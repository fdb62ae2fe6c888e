"""Packaging beyond ``pyproject.toml``: every folder of ``app`` ships as a package, those without
``__init__.py`` too (``migrations``, and ``templates``/``static``, links to the repository's
folders of the pages): setuptools treats each importable folder as a package and warns about any
it is not told of."""

from setuptools import find_namespace_packages, setup

setup(packages=find_namespace_packages(include=["app", "app.*"], exclude=["*.__pycache__"]))
