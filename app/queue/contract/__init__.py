"""The wire contract: the request and response models of the JSON API and the pages, and the
strict JSON and field rules they share. No SQL and no use case here."""
