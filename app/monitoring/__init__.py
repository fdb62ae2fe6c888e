"""Operations: health, Prometheus metrics, the workers overview, and reading the audit log."""
