"""What the benchmark and the sweeps share: a progress line per item, results saved after each."""

from __future__ import annotations

import json
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator, Sequence, TypeVar

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

Item = TypeVar("Item")
Result = TypeVar("Result")


def stderr_reporter(prefix: str) -> Callable[[str], None]:
    return lambda message: print(f"[{prefix}] {message}", file=sys.stderr, flush=True)


def saver(out: Path, stem: str, markdown: Callable[[list], str]) -> Callable[[list], None]:
    """Writes all results so far to ``out/<stem>.json`` (dataclasses as dicts) and ``<stem>.md``."""
    out.mkdir(parents=True, exist_ok=True)

    def save(results: list) -> None:
        (out / f"{stem}.json").write_text(json.dumps([asdict(r) for r in results], indent=2))
        (out / f"{stem}.md").write_text(markdown(results))

    return save


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


def load_results(out: Path, stem: str, result_type: Callable[..., Result]) -> list[Result]:
    """The results ``saver`` wrote to ``out/<stem>.json``, if any."""
    path = out / f"{stem}.json"
    return [result_type(**r) for r in json.loads(path.read_text())] if path.is_file() else []


def run_merged(
    items: Sequence[Item],
    run_one: Callable[[Item], Result],
    keys: set[str],
    out: Path,
    stem: str,
    result_type: Callable[..., Result],
    markdown: Callable[[list], str],
    chart: Callable[[list, Path], None],
    report: Callable[[str], None],
) -> list[Result]:
    """``run_each`` into ``out/<stem>.{json,md,png}``, beside the results already there whose
    ``point`` is not among ``keys`` (other axes, masters or runs), so a report can be built up
    run by run. Returns this run's results."""
    earlier = [r for r in load_results(out, stem, result_type) if r.point not in keys]  # type: ignore[attr-defined]
    save_all = saver(out, stem, markdown)
    results = run_each(items, run_one, lambda done: save_all(earlier + done), report, "point")
    chart(earlier + results, out / f"{stem}.png")
    return results


@contextmanager
def spark_progress(spark: "SparkSession", report: Callable[[str], None], every: float = 5.0) -> Iterator[None]:
    """While the block runs, report every ``every`` seconds the elapsed time and the tasks done
    of each running Spark stage (from the status tracker), for work that runs as Spark jobs.
    On Spark Connect, whose client sees no stages, the elapsed time alone."""
    from eqdelete import _jvm, _remote

    remote = _remote.is_remote(spark)

    done = threading.Event()
    started = time.monotonic()

    def watch() -> None:
        while not done.wait(every):
            stages = [] if remote else _jvm.active_stage_progress(spark)
            work = "; ".join(f"stage {i} ({name.split(' at ')[0]}): {finished}/{total} tasks"
                             for i, name, finished, total in stages) or ("running on the server" if remote else "planning or committing")
            report(f"{time.monotonic() - started:.0f}s: {work}")

    thread = threading.Thread(target=watch, name="eqdelete-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
