"""Concerto: I/O scheduling on shared parallel file systems.

The Rust engine (``concerto._native``) does the work; this package is the
front door: the ``concerto`` CLI, experiment sweeps, reports and plots.
"""

from concerto._native import ConfigError, __version__

__all__ = ["ConfigError", "__version__"]
