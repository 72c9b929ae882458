"""``python -m rproxjax``: the main demonstration (see README).

This command is a process of its own, so it turns on JAX's persistent compilation cache
for itself (:func:`rproxjax.enable_compilation_cache`): a second run loads the compiled
programs instead of compiling them again. The cache lives in ``$RPROXJAX_CACHE_DIR``, else
``$XDG_CACHE_HOME/rproxjax/xla`` (``~/.cache/rproxjax/xla``); ``--no-cache`` turns it off.
"""

import sys

from rproxjax._cache import enable_compilation_cache
from rproxjax._demo import main

if __name__ == "__main__":
    if "--no-cache" not in sys.argv[1:]:
        enable_compilation_cache()
    main()
