"""The tests' process resolves the stand-in's sandbox names (`*.localhost`) as its jobs do: with
the stand-in's resolver (standin/sim/resolver/sitecustomize.py), which only tests load; the
trainer itself ships none."""

import runpy
from pathlib import Path

runpy.run_path(str(Path(__file__).resolve().parents[2] / "standin" / "sim" / "resolver" / "sitecustomize.py"))
