"""Alembic, driven from the app: the migrations live in ``app/migrations``."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from flask import Flask

from app import db

MIGRATIONS = Path(__file__).parent / "migrations"


def alembic_config() -> Config:
    """An Alembic config pointing at the app's migration scripts."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    return config


def upgrade(app: Flask, revision: str = "head") -> None:
    """Create or migrate the schema of the app's database."""
    config = alembic_config()
    with db.engine(app).begin() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, revision)
