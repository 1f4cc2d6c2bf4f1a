"""The portal's extension points: how an app lets the apps above it add what it cannot import
(they import it), in one shape.

A `Hook` is declared by the app that calls it, in that app's `hooks.py`: its name, a
`typing.Protocol` that every entry implements (so the type checker holds each registration to
it), and the order of its entries by name. That order is the hook's, written where the hook is
declared: not the order in which apps happen to be installed, and an entry whose name is not
in it is refused at registration. The apps above register their entries in their
AppConfig.ready(); the declaring app calls every entry, in that order, and uses every answer
(how it combines them is said beside each hook).

`registry` holds every hook by name, as NetBox's `registry` holds its extension points: one
place to see what can be extended and by whom (tests/architecture reads it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class Hook(Generic[T]):
    """An extension point: entries of type T (a Protocol), called in `order`."""

    def __init__(self, name: str, *, order: tuple[str, ...]) -> None:
        if name in registry:
            raise ValueError(f"a hook named {name!r} is declared already")
        if len(set(order)) != len(order):
            raise ValueError(f"{name}: an entry named twice in the order {order}")
        self.name = name
        self.order = order
        self._entries: dict[str, T] = {}
        registry[name] = self

    def register(self, name: str, entry: T) -> None:
        """Add `entry` under `name` (registering a name again replaces its entry)."""
        if name not in self.order:
            raise ValueError(f"{name!r} has no place in the order of {self.name} "
                             f"({', '.join(self.order)}): give it one where the hook is declared")
        self._entries[name] = entry

    def entries(self) -> list[tuple[str, T]]:
        """(name, entry) of every registered entry, in the hook's order."""
        return [(name, self._entries[name]) for name in self.order if name in self._entries]

    def __iter__(self) -> Iterator[T]:
        return iter([entry for _, entry in self.entries()])

    def __len__(self) -> int:
        return len(self._entries)

    @contextmanager
    def replaced(self, entries: Mapping[str, T], *, order: tuple[str, ...] | None = None
                 ) -> Iterator[None]:
        """For a test: this hook with `entries` alone (in `order`, else the hook's), as it
        was again afterwards."""
        saved = self.order, self._entries
        self.order = order if order is not None else self.order
        self._entries = {}
        try:
            for name, entry in entries.items():
                self.register(name, entry)
            yield
        finally:
            self.order, self._entries = saved

    def __repr__(self) -> str:
        return f"<Hook {self.name}: {', '.join(name for name, _ in self.entries())}>"


registry: dict[str, Hook[Any]] = {}


class SharedReads:
    """What the entries called for one request read once and share (the launch check's
    advisors, the capacity outlook's entries): `get(key, build)` builds on the first ask and
    answers the same object after. Keys are the readers' own (their app's name first)."""

    def __init__(self) -> None:
        self._values: dict[Any, Any] = {}

    def get(self, key: Any, build: Callable[[], T]) -> T:
        if key not in self._values:
            self._values[key] = build()
        value: T = self._values[key]
        return value
