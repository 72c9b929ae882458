"""``python -m rproxjax``: the main demonstration (see README).

This command is a process of its own, so it turns on JAX's persistent compilation cache
for itself (the library never changes JAX's configuration): a second run loads the compiled
programs instead of compiling them again. The cache lives in ``$RPROXJAX_CACHE_DIR``, else
``$XDG_CACHE_HOME/rproxjax/xla`` (``~/.cache/rproxjax/xla``); ``--no-cache`` turns it off.
"""

import os
import sys

from rproxjax._demo import main


def cache_dir() -> str:
    """Where the command keeps compiled programs."""
    if os.environ.get("RPROXJAX_CACHE_DIR"):
        return os.environ["RPROXJAX_CACHE_DIR"]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "rproxjax", "xla")


def enable_cache(path: str) -> None:
    import jax

    jax.config.update("jax_compilation_cache_dir", path)
    # Every program the demo compiles takes 0.05-3 s; the default 1 s floor would skip most.
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)


if __name__ == "__main__":
    if "--no-cache" not in sys.argv[1:]:
        enable_cache(cache_dir())
    main()
