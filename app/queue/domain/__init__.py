"""The domain: job states and the edges between them, who may do what, and the use cases both
front ends call. The SQL lives in ``app.queue.engines``, the wire models in
``app.queue.contract``."""
