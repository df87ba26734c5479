"""Progress of long operations, reported as lines on stderr: the one reporter the library and its
tools use."""

from __future__ import annotations

import sys
import threading
import time
from contextlib import contextmanager
from typing import TYPE_CHECKING, Callable, Iterator

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def stderr_reporter(prefix: str) -> Callable[[str], None]:
    """Progress as `[prefix] message` lines on stderr, flushed, so long runs show where they are."""
    return lambda message: print(f"[{prefix}] {message}", file=sys.stderr, flush=True)


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
