"""A restart as it happens in production: a new application (a new driver and new executor JVMs)
on the same table with the same settings, whose first round of maintain, or first read of a
commit's changes, restores the kept state the benchmark's own application checkpointed.

The benchmarks also restart inside their own application (the state forgotten, the JVMs warm):
side by side, the two show what loading the state costs and what a new process's first work
costs on top (classes loaded, code compiled, catalog and file systems started, on every JVM).
Run as ``python -m eqdelete.tools.restarted JOB`` by :func:`in_a_new_application`; it prints one
``RESULT {json}`` line.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any

from pyspark.sql import SparkSession

#: Settings that name the application that ran, not the one to start.
_OWN = ("spark.app.", "spark.driver.port", "spark.driver.host", "spark.executor.id", "spark.repl.", "spark.submit.")


def settings(spark: SparkSession) -> dict[str, str]:
    """The running application's settings that a new one on the same tables needs (master, memory,
    jars, catalogs, eqdelete's): all but those naming this application."""
    return {k: v for k, v in spark.sparkContext.getConf().getAll() if not k.startswith(_OWN)}


def in_a_new_application(spark: SparkSession, job: dict[str, Any], timeout: float = 3600) -> dict[str, Any]:
    """Runs ``job`` in a new process with this application's settings; what it reported. The
    caller's application stays up and idle meanwhile."""
    request = json.dumps({**job, "conf": settings(spark)})
    done = subprocess.run([sys.executable, "-m", "eqdelete.tools.restarted", request], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=timeout)
    results = [line[len("RESULT "):] for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or not results:
        raise RuntimeError(f"eqdelete: the restart in a new application failed (exit {done.returncode}): "
                           f"{done.stderr.strip()[-2000:]}")
    return json.loads(results[-1])


def _maintain(spark: SparkSession, job: dict[str, Any]) -> dict[str, Any]:
    from eqdelete.maintain import maintain_round
    from eqdelete.toggles import use_conf

    with use_conf(spark, [tuple(kv) for kv in job["round_conf"]]):
        started = time.perf_counter()
        done = maintain_round(spark, job["table"], keep_index=job.get("keep_index", True))
        wall = time.perf_counter() - started
    return {"seconds": done.seconds, "wall_seconds": wall, "rows_resolved": done.rows_resolved,
            "data_files_read": done.data_files_read, "note": done.live_index_note or ""}


def _changes(spark: SparkSession, job: dict[str, Any]) -> dict[str, Any]:
    from eqdelete.compare import fingerprint
    from eqdelete.toggles import use_conf, use_strategy

    images = spark.sparkContext._jvm.eqdelete.changes.KeptRowImages  # noqa: SLF001
    with use_strategy(spark, "auto"), use_conf(spark, [("spark.eqdelete.changes.rowImages", "true")]):
        started = time.perf_counter()
        spark.sql(job["sql"]).write.format("noop").mode("overwrite").save()
        seconds = time.perf_counter() - started
        rows = fingerprint(spark.sql(job["sql"]))
    return {"seconds": seconds, "restored": int(images.restored()), "built": int(images.built()), "fingerprint": list(rows)}


def main(request: str) -> None:
    job = json.loads(request)
    started = time.perf_counter()
    builder = SparkSession.builder.appName(f"eqdelete restarted ({job['kind']})")
    for key, value in job["conf"].items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    session_seconds = time.perf_counter() - started
    done = {"maintain": _maintain, "changes": _changes}[job["kind"]](spark, job)
    print("RESULT " + json.dumps({**done, "session_seconds": session_seconds}), flush=True)
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1])
