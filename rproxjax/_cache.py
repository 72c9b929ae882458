"""``rproxjax.enable_compilation_cache``: JAX's persistent compilation cache, opt-in."""

from __future__ import annotations

import os

__all__ = ["default_cache_dir", "enable_compilation_cache"]


def default_cache_dir() -> str:
    """``$RPROXJAX_CACHE_DIR``, else ``$XDG_CACHE_HOME/rproxjax/xla`` (by default
    ``~/.cache/rproxjax/xla``)."""
    if os.environ.get("RPROXJAX_CACHE_DIR"):
        return os.environ["RPROXJAX_CACHE_DIR"]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "rproxjax", "xla")


def enable_compilation_cache(path: str | os.PathLike | None = None) -> str:
    """Turns on JAX's persistent compilation cache, so that later processes load the
    programs this one compiles (a first call's compilation, most of its wait, then takes a
    fraction of the time).

    This is the one function of the library that changes JAX's global configuration, and
    only when called: it sets ``jax_compilation_cache_dir`` to ``path`` and
    ``jax_persistent_cache_min_compile_time_secs`` to 0 (the library's programs compile in
    0.05-3 s; JAX's default floor of 1 s would leave most of them out). Call it once, at
    the start of a program, before the first computation. ``python -m rproxjax`` and
    ``python -m experiments`` call it.

    Args:
      path: the cache folder (created if missing). Default: :func:`default_cache_dir`.

    Returns:
      The folder, as a string.

    Raises:
      TypeError: ``path`` is not a string or path.
      OSError: the folder cannot be created.

    Example:
        >>> import rproxjax, tempfile
        >>> folder = rproxjax.enable_compilation_cache(tempfile.mkdtemp())  # doctest: +SKIP
    """
    import jax

    if path is None:
        path = default_cache_dir()
    if not isinstance(path, str | os.PathLike):
        raise TypeError(f"path must be a string or os.PathLike, got {type(path).__name__}.")
    path = os.fspath(path)
    os.makedirs(path, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    return path
