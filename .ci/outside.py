"""CI, from an installed wheel outside the clone: every shipped data set loads, and the
Python examples of the README and of the getting-started page run as written (each page's
blocks in order, in one namespace).

Usage: python outside.py README.md getting_started.md  (in a folder that is not the clone)
"""

import importlib.util
import pathlib
import re
import sys

import rproxjax
from rproxjax import datasets

here = pathlib.Path.cwd().resolve()
package = pathlib.Path(rproxjax.__file__).resolve().parent
if package.is_relative_to(here) or (package.parent / ".git").exists():
    sys.exit(f"rproxjax is imported from {package}, not from an installed wheel")

# Every shipped data file, read by its loader from the installed package's own folder.
assert datasets.load_mnist(500).shape == (500, 784)
assert datasets.load_fashion_mnist(500).shape == (500, 784)
assert datasets.load_video_frames(10).shape == (10, 72, 96)
shipped = sorted(p.name for p in datasets.default_data_dir().iterdir())
# the data sets a user loads and no test fixture; the repository's lab is not installed
assert shipped == sorted([datasets.FASHION_MNIST_FILE, datasets.MNIST_FILE, datasets.VIDEO_FILE])
if importlib.util.find_spec("experiments") is not None:
    sys.exit("the repository's lab (experiments/) is importable outside the clone")
print("data in the wheel:", ", ".join(shipped))

for page in sys.argv[1:]:
    text = pathlib.Path(page).read_text()
    code = "\n".join(re.findall(r"```python\n(.*?)```", text, flags=re.S))
    assert code, f"{page} has no Python blocks"
    exec(compile(code, page, "exec"), {"__name__": "__page__"})  # noqa: S102
    print(f"the examples of {page} ran from the wheel")
