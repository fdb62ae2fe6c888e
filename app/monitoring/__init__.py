"""Operations: health, Prometheus metrics and the workers overview."""
