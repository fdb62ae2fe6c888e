"""The database, without Flask: its tables and migrations, each database's process-level ways
(``databases``), and the wake-ups and outcome watches that ride on its commits."""
