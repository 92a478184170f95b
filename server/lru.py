"""Caches bounded for a process shared by every session: ``ByteLRU`` keeps analyses
(``Analysis.nbytes`` each) within a byte budget, ``CountLRU`` finished results within a
number of entries; both drop the least recently used first and lock. Pure Python (no
Streamlit)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable


GONE_KEPT = 256  # ByteLRU: how many dropped keys it remembers having dropped


class ByteLRU:
    """A thread-safe mapping bounded by the total of ``size(value)`` in bytes; the
    least recently used entries go first. One entry larger than the budget is kept
    alone (the reader asked for it), then dropped by the next one."""

    def __init__(self, budget: int, size: Callable[[object], int]):
        self.budget, self.size = int(budget), size
        self._items: OrderedDict = OrderedDict()
        self._sizes: dict = {}
        self._lock = threading.Lock()
        self.evicted = 0
        self._gone: OrderedDict = OrderedDict()  # the keys dropped last (GONE_KEPT), until kept again

    def get(self, key, default=None):
        with self._lock:
            if key not in self._items:
                return default
            self._items.move_to_end(key)
            return self._items[key]

    def put(self, key, value) -> int:
        """Keep ``value``; the number of entries dropped to make room."""
        nbytes = int(self.size(value))
        dropped = 0
        with self._lock:
            if key in self._items:
                self._items.pop(key)
                self._sizes.pop(key)
            self._items[key] = value
            self._sizes[key] = nbytes
            self._gone.pop(key, None)
            while len(self._items) > 1 and self.nbytes > self.budget:
                self._drop_oldest()
                dropped += 1
        return dropped

    def _drop_oldest(self) -> None:
        """Drop the least recently used entry, remembering its key (under the lock)."""
        old, _ = self._items.popitem(last=False)
        self._sizes.pop(old)
        self.evicted += 1
        self._gone[old] = None
        while len(self._gone) > GONE_KEPT:
            self._gone.popitem(last=False)

    def shrink(self, budget: int) -> int:
        """Drop the least recently used entries until at most ``budget`` bytes are kept (all
        of them, where ``budget`` ≤ 0): how many were dropped."""
        dropped = 0
        with self._lock:
            while self._items and self.nbytes > max(budget, 0):
                self._drop_oldest()
                dropped += 1
        return dropped

    def was_dropped(self, key) -> bool:
        """Whether ``key`` was kept, then dropped to make room (among the last GONE_KEPT)."""
        with self._lock:
            return key in self._gone

    def values(self) -> list:
        with self._lock:
            return list(self._items.values())

    def __contains__(self, key) -> bool:
        with self._lock:
            return key in self._items

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._sizes.clear()

    def __len__(self) -> int:
        return len(self._items)

    @property
    def nbytes(self) -> int:
        return sum(self._sizes.values())


class CountLRU(ByteLRU):
    """A thread-safe mapping of at most ``entries`` entries, the least recently used
    dropped first: for results shared by every reader of a process (st.cache_resource
    hands every session the same object, so it must bound itself and lock)."""

    def __init__(self, entries: int):
        super().__init__(entries, lambda _value: 1)

    def __setitem__(self, key, value) -> None:
        self.put(key, value)

    def __getitem__(self, key):
        found = self.get(key, _MISSING)
        if found is _MISSING:
            raise KeyError(key)
        return found


_MISSING = object()
