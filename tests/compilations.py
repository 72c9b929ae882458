"""Counting XLA compilations in tests (JAX's backend-compile events)."""

import jax


def count_compilations(fn) -> int:
    """The XLA compilations while ``fn()`` runs."""
    count = []

    def listen(event, duration, **kwargs):
        if event == "/jax/core/compile/backend_compile_duration":
            count.append(duration)

    jax.monitoring.register_event_duration_secs_listener(listen)
    try:
        fn()
    finally:
        jax.monitoring.unregister_event_duration_listener(listen)
    return len(count)
