"""Run a coroutine to the end from synchronous code, with SIGTERM handled the way asyncio
handles Ctrl-C.

``sigterm_as_interrupt`` turns SIGTERM into an exception raised wherever the main thread is.
Inside an event loop that may be in the middle of a task (a socket write, say): the task then
stores the interrupt, and the loop's own shutdown, which awaits every task it cancels, meets it
again and stops before the other tasks have closed their connections; asyncio then prints their
half-closed coroutines as tracebacks. Here SIGTERM instead cancels the main task, which cleans up
inside the loop, and ``Terminated`` is raised once the loop is closed: the same route as
``asyncio.run``'s own first Ctrl-C.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from radspatial.core.executor import Terminated

T = TypeVar("T")

__all__ = ["run_async"]


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(coro)``; in the main thread SIGTERM cancels ``coro`` and then raises
    :class:`~radspatial.core.executor.Terminated` (a second SIGTERM raises at once)."""
    if threading.current_thread() is not threading.main_thread():
        return asyncio.run(coro)
    main: list[asyncio.Task[Any]] = []
    received: list[int] = []

    async def tracked() -> T:
        task = asyncio.current_task()
        assert task is not None
        main.append(task)
        return await coro

    with asyncio.Runner() as runner:
        loop = runner.get_loop()

        def on_term(signum: int, frame: object) -> None:
            received.append(signum)
            if len(received) == 1 and main and not main[0].done():
                main[0].cancel()
                loop.call_soon_threadsafe(lambda: None)  # wake a select() with a long timeout
                return
            raise Terminated()

        previous = signal.signal(signal.SIGTERM, on_term)
        try:
            return runner.run(tracked())
        except asyncio.CancelledError:
            if received:
                raise Terminated() from None
            raise
        finally:
            signal.signal(signal.SIGTERM, previous)
