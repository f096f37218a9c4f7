"""python3 -m tokdyn_plot KIND DIR: the same as python/plot.py KIND DIR."""
from . import main

main(prog="python3 -m tokdyn_plot")
