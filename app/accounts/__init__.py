"""Users, roles, passwords and API tokens."""
