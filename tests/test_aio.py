"""SIGTERM inside an event loop: every task cleans up inside the loop, then ``Terminated``."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest

from radspatial.core.aio import run_async
from radspatial.core.executor import Terminated, sigterm_as_interrupt


def _job(steps: list[str]):
    async def child() -> None:
        await asyncio.sleep(0)
        os.kill(os.getpid(), signal.SIGTERM)  # the handler runs inside this task's step
        try:
            await asyncio.sleep(60)
        finally:
            steps.append("child closed")

    async def main() -> None:
        task = asyncio.create_task(child())
        try:
            await asyncio.sleep(60)
        finally:
            task.cancel()
            await asyncio.wait({task})
            await asyncio.sleep(0)  # cleanup that itself awaits, as closing a client does
            steps.append("main closed")

    return main()


def test_sigterm_inside_a_task_cancels_the_run_and_every_task_closes() -> None:
    steps: list[str] = []
    with sigterm_as_interrupt(), pytest.raises(Terminated):
        run_async(_job(steps))
    assert steps == ["child closed", "main closed"]


def test_a_plain_run_returns_its_value_and_leaves_the_handler_as_it_was() -> None:
    async def value() -> int:
        await asyncio.sleep(0)
        return 7

    before = signal.getsignal(signal.SIGTERM)
    assert run_async(value()) == 7
    assert signal.getsignal(signal.SIGTERM) is before
