"""The compiled runner: :func:`fit`, :func:`pure_fit` and :func:`sweep`.

* :mod:`.fit`: the entry points, their arguments and :class:`FitResult`;
* :mod:`.program`: the epoch program and :class:`History`;
* :mod:`.data`: finite sums and streams (sampling plans);
* :mod:`.sharding`: data-parallel sums;
* :mod:`.compile`: compile once per structure;
* :mod:`.checks`: argument checks of the entry points;
* :mod:`.sweep`: many hyperparameter values in one program.
"""
