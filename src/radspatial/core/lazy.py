"""Names of a package imported on first use (PEP 562's module ``__getattr__``), so importing
the package, or a light module in it such as its job spec, loads nothing heavy.

Example:
    >>> __getattr__ = lazy_names("radspatial.probes", {"build_probes": "radspatial.probes.build"})
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any


def lazy_names(package: str, table: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: ``name`` is read from the module ``table``
    names, on first use, and kept in the package's namespace (later look-ups skip this)."""

    def get(name: str) -> Any:
        if name not in table:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(table[name]), name)
        setattr(sys.modules[package], name, value)
        return value

    return get
