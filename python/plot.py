#!/usr/bin/python3
"""tokdyn figures: `plot.py KIND DIR` draws the figures of one results directory from its CSV
files (figures are always drawn from written results, never from the run's memory).

The entry point tokdyn runs (src/runtime/figures.cpp: /usr/bin/python3 python/plot.py KIND DIR); the
figures live in the package tokdyn_plot beside this file (one module per figure family, each
declaring its kinds; see tokdyn_plot/__init__.py). Uses Debian's /usr/bin/python3 with
python3-numpy and python3-matplotlib."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tokdyn_plot  # noqa: E402

if __name__ == "__main__":
    tokdyn_plot.main()
