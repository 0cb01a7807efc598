"""``python -m concerto``: the same command line as ``concerto``."""

from concerto.cli import main

main()
