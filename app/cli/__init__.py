"""The command line: ``flask --app app`` commands (db, user, token, jobs, audit, setup)."""
