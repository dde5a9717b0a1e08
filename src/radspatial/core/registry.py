"""One generic registry for every extension point (question types, backends, localizers,
encoders, probe heads).

A registry maps a name to an entry (an object or a factory). Built-in entries register
themselves when their module is imported; the registry imports those modules lazily, the first
time it is asked for a name, so listing stays fast and heavy imports (torch) stay where they
are used. Example::

    LOCALIZERS: Registry[Factory] = Registry(
        "localizer", ("localizers.mask.mask_localizer",), package="radspatial.agent"
    )

    @LOCALIZERS.register("mask")
    class MaskLocalizer: ...

    LOCALIZERS.get("mask")  # the class; LOCALIZERS.names() -> ["mask", ...]
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from importlib import import_module
from typing import Generic, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    """Name -> entry, filled by ``register`` and by lazily importing ``modules`` (names inside
    ``package`` when it is given)."""

    def __init__(self, kind: str, modules: tuple[str, ...] = (), *, package: str = "") -> None:
        self.kind = kind  # used in messages: "unknown localizer 'x'"
        self._modules = tuple(f"{package}.{m}" if package else m for m in modules)
        self._entries: dict[str, T] = {}
        self._loaded = not modules

    def add(self, name: str, entry: T) -> T:
        if name in self._entries:
            raise ValueError(f"{self.kind} {name!r} registered twice")
        self._entries[name] = entry
        return entry

    def remove(self, name: str) -> T:
        """Take an entry out (a plugin replacing a built-in, a test); returns it."""
        self._load()
        return self._entries.pop(name)

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator: ``@REGISTRY.register("name")``."""

        def deco(entry: T) -> T:
            return self.add(name, entry)

        return deco

    def _load(self) -> None:
        if not self._loaded:
            for module in self._modules:  # each calls register() as it is imported
                import_module(module)
            self._loaded = True

    def names(self) -> list[str]:
        self._load()
        return sorted(self._entries)

    def __contains__(self, name: object) -> bool:
        self._load()
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def items(self) -> list[tuple[str, T]]:
        return [(name, self._entries[name]) for name in self.names()]

    def get(self, name: str) -> T:
        self._load()
        if name not in self._entries:
            raise ValueError(f"unknown {self.kind} {name!r}; known: {', '.join(self.names())}")
        return self._entries[name]
