"""A deterministic order for trace rows added by concurrent steps.

Rows are appended as steps finish, so two identical runs may append them in different orders (and
``traces.jsonl``, a DVC output, would hash differently). Each asyncio task created under
:func:`ordered_tasks` gets a path: its parent's path plus the parent's count of tasks created and
rows added so far. A row's key is its task's path plus that count at the time it is added, which
depends on the program's order (which task made which, in what order), not on timing; sorting a
sample's rows by key (:func:`sort_rows`) gives the same order in every run. Rows added outside
:func:`ordered_tasks` get an empty key and keep their order.
"""

from __future__ import annotations

import asyncio
import contextvars
import weakref
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from typing import Any


class _Node:
    __slots__ = ("count", "path")

    def __init__(self, path: tuple[int, ...]):
        self.path = path
        self.count = 0

    def take(self) -> int:
        self.count += 1
        return self.count - 1


_USERS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, int] = weakref.WeakKeyDictionary()
_NODE: contextvars.ContextVar[_Node | None] = contextvars.ContextVar("edumas_trace_node", default=None)


def _task_factory(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any], **kwargs: Any) -> asyncio.Task:
    context = kwargs.pop("context", None) or contextvars.copy_context()  # the creating task's context
    parent = _NODE.get()
    if parent is not None:
        context.run(_NODE.set, _Node((*parent.path, parent.take())))
    return asyncio.Task(coro, loop=loop, context=context, **kwargs)


def order_key() -> tuple[int, ...]:
    """The key of a row added now (empty outside :func:`ordered_tasks`)."""
    node = _NODE.get()
    return () if node is None else (*node.path, node.take())


@contextmanager
def ordered_tasks() -> Iterator[None]:
    """Inside a running event loop: give the tasks created from here on their paths (the loop's own
    task factory, if it has one, is left alone: rows then keep their append order)."""
    loop = asyncio.get_running_loop()
    ours = loop.get_task_factory() in (None, _task_factory)
    if ours:  # runs nest and overlap in one loop: the last one out uninstalls the factory
        loop.set_task_factory(_task_factory)
        _USERS[loop] = _USERS.get(loop, 0) + 1
    token = _NODE.set(_Node(()))
    try:
        yield
    finally:
        _NODE.reset(token)
        if ours:
            _USERS[loop] -= 1
            if not _USERS[loop]:
                del _USERS[loop]
                loop.set_task_factory(None)


def sort_rows(rows: list[dict[str, Any]], keys: list[tuple[int, ...]]) -> list[dict[str, Any]]:
    """``rows`` by their keys (stable: equal keys keep their order)."""
    return [row for _, row in sorted(zip(keys, rows, strict=True), key=lambda pair: pair[0])]
