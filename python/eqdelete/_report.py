"""What the benchmark and the sweeps share: a progress line per item, results saved after each."""

from __future__ import annotations

import sys
import time
from typing import Callable, Sequence, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")


def stderr_reporter(prefix: str) -> Callable[[str], None]:
    return lambda message: print(f"[{prefix}] {message}", file=sys.stderr, flush=True)


def run_each(
    items: Sequence[Item],
    run_one: Callable[[Item], Result],
    save: Callable[[list[Result]], None],
    report: Callable[[str], None],
    noun: str,
) -> list[Result]:
    """Run every item in order, reporting progress and saving all results so far after each,
    so an interrupted run keeps what it measured."""
    started = time.monotonic()
    results: list[Result] = []
    for i, item in enumerate(items, 1):
        report(f"{noun} {i}/{len(items)} ({time.monotonic() - started:.0f}s elapsed)")
        results.append(run_one(item))
        save(results)
    return results
