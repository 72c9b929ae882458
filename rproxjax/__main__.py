"""``python -m rproxjax``: the main demonstration (see README)."""

from rproxjax._demo import main

if __name__ == "__main__":
    main()
