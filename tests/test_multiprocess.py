"""The rewrite on a multi-process Spark (local-cluster: executors in their own JVMs), so the
data file index, the filter's delete keys (its broadcast handle too, read by interpreted
evaluation on the executors), the delete-row reader, the broadcast delete side and resolving's
writers all cross JVM boundaries by serialization; the live-row index's stores and the changes'
kept row images are held by both executors, and their tasks run where their store is."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from conftest import REPO

SCRIPT = """
import sys
sys.path.insert(0, {tests!r})
import eqdelete
from fixtures import FIXTURES, sorted_rows
from oracle import check_against_native

import os
spark = eqdelete.session(
    "eqdelete-local-cluster", master="local-cluster[2,1,1024]", warehouse={warehouse!r},
    iceberg_version=os.environ.get("EQDELETE_TEST_ICEBERG") or None,
    conf={{"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "4",
           "spark.sql.session.timeZone": "UTC", "spark.sql.adaptive.enabled": "false",
           # The executors' JVMs start as the driver's (tests/conftest.py): C1 only, the class archive.
           "spark.executor.extraJavaOptions": os.environ.get("SPARK_SUBMIT_OPTS", "")}},
)
spark.sparkContext.setLogLevel("ERROR")
spark.sql("CREATE NAMESPACE IF NOT EXISTS local.mp")
import time
deadline = time.monotonic() + 120  # executor JVMs register a while after the session starts
while (executors := spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1) < 2 and time.monotonic() < deadline:
    time.sleep(1)
assert executors == 2, f"expected 2 executor JVMs, got {{executors}}"
for name in ("null_keys", "global_after_spec_change", "two_equality_sets"):
    fixture = FIXTURES[name](spark, f"local.mp.{{name}}")
    check_against_native(spark, lambda: spark.sql(f"SELECT * FROM {{fixture.table}}"), expect_rewrites=1)
    # Interpreted evaluation: each executor reads the index's broadcast handle itself.
    interpreted = [("spark.eqdelete.strategy", "filter"), ("spark.sql.codegen.wholeStage", "false"),
                   ("spark.sql.codegen.factoryMode", "NO_CODEGEN")]
    with eqdelete.use_conf(spark, interpreted):
        assert sorted_rows(spark.table(fixture.table).collect()) == sorted_rows(fixture.expected), name
    print("checked", name)
with eqdelete.use_strategy(spark, "join"):
    plan = spark.sql("EXPLAIN SELECT * FROM local.mp.null_keys").first()[0]
assert "BroadcastHashJoin" in plan and "LeftAnti" in plan, plan
# Resolving: Iceberg's writers, the data files' specs, partitions and deletion vectors, and the
# written files cross JVMs.
from test_resolve import build, eq_delete_files, native_rows
for version in (2, 3):
    history = build(spark, f"local.mp.resolve_v{{version}}", version)
    result = eqdelete.resolve_equality_deletes(spark, f"local.mp.resolve_v{{version}}")
    assert result.committed and result.rows_resolved == history.model.resolvable(), result
    assert eq_delete_files(spark, f"local.mp.resolve_v{{version}}") == 0
    assert native_rows(spark, f"local.mp.resolve_v{{version}}") == history.model.live()
    print("resolved", version)
# The live-row index: its stores created on both executors, loaded and looked up by tasks
# pinned to each store's executor (a task elsewhere would find no store and fail as lost).
from eqdelete import _jvm
index = _jvm.live_key_store_bulk(spark, 50_000, 4, 10)
assert index["executors"] == 2 and index["entries"] == 50_000 and index["found"] == index["asked"] == 40_000, index
# Kept row images for the changes: built, brought forward and looked up by tasks at their stores on
# both executors; the same rows as the changes read from the data files.
from fixtures import MOR
spark.sql(f"CREATE TABLE local.mp.changes (k BIGINT, v STRING) USING iceberg TBLPROPERTIES ({{MOR.format(v=2)}})")
spark.range(0, 2000, 1, 4).selectExpr("id AS k", "concat('a', id) AS v").writeTo("local.mp.changes").append()
for tag in ("b", "c", "d"):
    keys = [(k,) for k in range(0, 2000, 7 if tag == "b" else 11)]
    eqdelete.write_equality_deletes(spark, "local.mp.changes", ["k"], keys, inserts=[(k, tag + str(k)) for (k,) in keys])
answered = spark.sparkContext._jvm.eqdelete.changes.KeptRowImages.snapshotsAnswered()
plain = sorted(map(tuple, eqdelete.changes(spark, "local.mp.changes").collect()))
with eqdelete.use_conf(spark, [("spark.eqdelete.changes.rowImages", "true")]):
    imaged = sorted(map(tuple, eqdelete.changes(spark, "local.mp.changes").collect()))
assert imaged == plain and len(plain) > 1000, (len(imaged), len(plain))
assert spark.sparkContext._jvm.eqdelete.changes.KeptRowImages.snapshotsAnswered() - answered == 3
print("MULTIPROCESS OK")
"""


def test_rewrite_on_local_cluster(tmp_path: Path) -> None:
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent(SCRIPT.format(tests=str(REPO / "tests"), warehouse=str(tmp_path / "wh"))))
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    result = subprocess.run(
        [sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, env=env, timeout=600, cwd=tmp_path,
    )
    assert result.returncode == 0 and "MULTIPROCESS OK" in result.stdout, result.stdout[-5000:]
