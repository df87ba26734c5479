"""Four writers into one copy across two processes (two Spark applications, two threads each) on
the lakehouse's REST catalog, as writers of one copy run on separate machines: insert-only applies
never conflict, nothing is lost, and every mark is on the copy once."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import apply_writers
from lakehouse.conftest import iceberg_release
from processes import TESTS, _env
from pyspark.sql import SparkSession

from eqdelete.tools.lakehouse import Lakehouse, spark_jars

# The other process: its two writers start when the test's file `go` appears, so that all four run at once.
OTHER = """
import json, sys, time
from pathlib import Path
import eqdelete
from eqdelete.errors import one_line
import apply_writers
options, copy, go, sources = json.loads(sys.argv[1]), sys.argv[2], Path(sys.argv[3]), json.loads(sys.argv[4])
spark = eqdelete.session("other-writers", master="local[2]", warehouse=sys.argv[5], conf=options, iceberg_version=sys.argv[6])
spark.sparkContext.setLogLevel("ERROR")
print("READY", flush=True)
while not go.exists():
    time.sleep(0.05)
failures = apply_writers.write(spark, copy, {int(i): s for i, s in sources.items()}, batches=4)
print("FAILURES", json.dumps([one_line(f) for f in failures]), flush=True)
"""


def test_four_writers_in_two_processes_append_into_one_copy(spark: SparkSession, lake: str, lakehouse: Lakehouse,
                                                            tmp_path: Path) -> None:
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {lake}.writers")
    copy, sources = f"{lake}.writers.copy", {i: f"{lake}.writers.s{i}" for i in range(4)}
    apply_writers.create(spark, copy, list(sources.values()))
    release = iceberg_release(spark)
    options = {**lakehouse.spark_options(lake), "spark.jars": ",".join(spark_jars(release)),
               "spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"}
    go, script = tmp_path / "go", tmp_path / "other.py"
    script.write_text(OTHER)
    other = subprocess.Popen([sys.executable, str(script), json.dumps(options), copy, str(go),
                              json.dumps({i: sources[i] for i in (2, 3)}), str(tmp_path / "wh"), release],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                             env=_env(Path(sys.executable), None))
    try:
        ready = other.stdout.readline()
        assert ready.strip() == "READY", ready + other.stderr.read()[-3000:]
        go.touch()
        here = apply_writers.write(spark, copy, {i: sources[i] for i in (0, 1)}, batches=4)
        out, err = other.communicate(timeout=600)
    finally:
        if other.poll() is None:
            other.kill()
            other.wait()
    assert other.returncode == 0, out[-2000:] + err[-3000:]
    assert here == [] and "FAILURES []" in out, (here, out[-2000:])
    spark.sql(f"REFRESH TABLE {copy}")
    assert Counter(tuple(r) for r in spark.table(copy).collect()) == apply_writers.expected_rows(4, 4)
    assert apply_writers.marks(spark, copy) == Counter({(f"w{i}", b): 1 for i in range(4) for b in range(4)})
