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


KEPT_STATE = """
import os, subprocess, sys, threading, time
sys.path.insert(0, {tests!r})
import eqdelete
from eqdelete import maintain_round, use_conf, use_strategy, write_equality_deletes
from fixtures import MOR

phase = sys.argv[1]
spark = eqdelete.session(
    "eqdelete-kept-state-" + phase, master="local-cluster[2,1,1024]", warehouse={warehouse!r},
    iceberg_version=os.environ.get("EQDELETE_TEST_ICEBERG") or None,
    conf={{"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "4", "spark.sql.adaptive.enabled": "false",
           "spark.sql.session.timeZone": "UTC", "spark.executor.extraJavaOptions": os.environ.get("SPARK_SUBMIT_OPTS", ""),
           "spark.eqdelete.maintain.liveIndex": "always", "spark.eqdelete.changes.rowImages": "true",
           "spark.eqdelete.sink.keptRows": "true",
           "spark.eqdelete.state.deltasPerSnapshot": "3", "spark.locality.wait": "2s"}},
)
spark.sparkContext.setLogLevel("ERROR")
sc, jvm = spark.sparkContext, spark.sparkContext._jvm
images = jvm.eqdelete.changes.KeptRowImages
copies = jvm.eqdelete.sink.KeptCopyRows
table = "local.mp.kept"
deadline = time.monotonic() + 120
while sc._jsc.sc().getExecutorMemoryStatus().size() - 1 < 2 and time.monotonic() < deadline:
    time.sleep(1)
assert sc._jsc.sc().getExecutorMemoryStatus().size() - 1 == 2

def model():
    return {{r.k: r.v for r in spark.table(table + "_model").collect()}}

def upsert(tag, step):
    # One upsert commit through Iceberg's writer, as Flink's sink writes them; the model table
    # (no deletes) holds the rows the table must have.
    keys = [(k,) for k in range(0, 20000, step)]
    write_equality_deletes(spark, table, ["k"], keys, inserts=[(k, f"{{tag}}{{k}}") for (k,) in keys])
    spark.sql(f"MERGE INTO {{table}}_model t USING (SELECT id AS k, concat('{{tag}}', id) AS v FROM range(0, 20000, {{step}})) s "
              "ON t.k = s.k WHEN MATCHED THEN UPDATE SET v = s.v")

def round_checked(what):
    result = maintain_round(spark, table, keep_index=True)
    assert result.committed and result.rows_resolved > 0, (what, result.render())
    with use_strategy(spark, "native"):
        assert {{r.k: r.v for r in spark.table(table).collect()}} == model(), what
    return result

def changes_checked(what):
    # The last snapshot's changes through the kept row images, against the same changes read from the data files.
    snapshots = [r[0] for r in spark.sql(f"SELECT snapshot_id FROM {{table}}.snapshots ORDER BY committed_at").collect()]
    def read():
        return sorted(map(tuple, eqdelete.changes(spark, table, start_snapshot_id=snapshots[-2]).collect()))
    answered = images.snapshotsAnswered()
    imaged = read()
    assert images.snapshotsAnswered() - answered == 1, what
    with use_conf(spark, [("spark.eqdelete.changes.rowImages", "false")]):
        plain = read()
    assert imaged == plain and len(plain) > 100, (what, len(imaged), len(plain))

def copy_checked(what):
    # The table's changes since the copy's mark applied to it, the rows they remove looked up in its kept rows.
    eqdelete.apply_changes_from(spark, table, table + "_copy", keys=["k"])
    assert {{r.k: r.v for r in spark.table(table + "_copy").collect()}} == model(), what

def loads_logged():
    from pyspark.find_spark_home import _find_spark_home
    work = os.path.join(_find_spark_home(), "work", sc.applicationId)
    found = subprocess.run(["grep", "-rh", "eqdelete: loaded partition", work], capture_output=True, text=True).stdout
    return [line for line in found.splitlines() if line]

if phase == "first":
    spark.sql("CREATE NAMESPACE IF NOT EXISTS local.mp")
    spark.sql(f"CREATE TABLE {{table}} (k BIGINT, v STRING) USING iceberg TBLPROPERTIES ({{MOR.format(v=2)}})")
    spark.range(0, 20000, 1, 4).selectExpr("id AS k", "concat('a', id) AS v").writeTo(table).append()
    spark.table(table).writeTo(table + "_model").using("iceberg").create()
    spark.sql(f"CREATE TABLE {{table}}_copy USING iceberg TBLPROPERTIES ({{MOR.format(v=2)}}) AS SELECT * FROM {{table}} LIMIT 0")
    copy_checked("the copy filled")
    upsert("b", 7)
    changes_checked("the first changes")
    copy_checked("the first apply on kept rows")
    assert images.built() == 1
    built = round_checked("the first round")
    assert "built from the table" in built.live_index_note, built.render()
    # One executor held by another job's long task: the tasks of the stores it holds run on the other
    # after the locality wait, which loads them from their checkpoints.
    # The task holds its executor until the checks beside it are done (a file says so), 45 s at most.
    released = os.path.join(os.path.dirname({warehouse!r}), "released")
    def held(x):
        for _ in range(450):
            if os.path.exists(released):
                break
            time.sleep(0.1)
        return x
    holding = threading.Thread(target=lambda: sc.parallelize([0], 1).map(held).collect())
    holding.start()
    time.sleep(3)
    upsert("c", 11)
    changes_checked("changes beside a busy executor")
    copy_checked("an apply beside a busy executor")
    busy = round_checked("a round beside a busy executor")
    assert busy.live_index_note is None, busy.render()
    open(released, "w").close()
    holding.join()
    print("LOADS AFTER BUSY", len(loads_logged()))
    # An executor JVM killed with kill -9 in the middle of a round and of a changes read: their
    # tasks run again elsewhere (or on the executor that replaces it), loading their stores.
    def kill_one():
        time.sleep(1.5)
        ps = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
        pids = [line.split()[0] for line in ps.splitlines() if "CoarseGrainedExecutorBackend" in line and sc.applicationId in line]
        assert pids, "no executor to kill"
        os.kill(int(pids[0]), 9)
    upsert("d", 13)
    changes_checked("changes before an executor is killed")
    killer = threading.Thread(target=kill_one)
    killer.start()
    killed = round_checked("a round with an executor killed")
    killer.join()
    assert killed.live_index_note is None, killed.render()
    upsert("e", 17)
    killer = threading.Thread(target=kill_one)
    killer.start()
    changes_checked("changes with an executor killed")
    killer.join()
    killer = threading.Thread(target=kill_one)
    killer.start()
    copy_checked("an apply with an executor killed")
    killer.join()
    assert copies.built() == 1, "the copy's kept rows were built again"
    round_checked("a round after an executor was killed")
    assert images.built() == 1, "the row images were built again"
    assert len(loads_logged()) > 0, "no store was loaded from its checkpoint"
    upsert("f", 19)  # left for the restart: a round and a changes read bring the state forward over it
    print("KEPT STATE FIRST OK", len(loads_logged()))
else:
    changes_checked("the first changes after a restart")
    assert images.restored() == 1 and images.built() == 0, (images.restored(), images.built())
    copy_checked("the first apply after a restart")
    assert copies.restored() == 1 and copies.built() == 0, (copies.restored(), copies.built())
    added = int(spark.sql(f"SELECT summary['added-data-files'] FROM {{table}}.snapshots ORDER BY committed_at DESC LIMIT 1").first()[0])
    restarted = round_checked("the first round after a restart")
    assert "restored from version" in (restarted.live_index_note or ""), restarted.render()
    # The index came forward over the commit since: only its new data files read, not the table's.
    assert restarted.data_files_read == added < len(spark.sql(f"SELECT * FROM {{table}}.data_files").collect()), restarted.render()
    print("KEPT STATE RESTART OK")
"""


def test_kept_state_survives_a_busy_executor_a_killed_executor_and_a_restart(tmp_path: Path) -> None:
    """maintain's kept index, the changes' kept row images and a copy's kept rows (apply_changes) on
    two executor JVMs: a busy executor
    (another job's long task), an executor killed with kill -9 in the middle of a round and of a read,
    and a restart of the whole application cost loads from their checkpoints (in the table's
    location, which both executors and the next application reach), never a failure or a rebuild;
    every round's rows, every read's changes and every apply's copy checked."""
    script = tmp_path / "kept.py"
    script.write_text(textwrap.dedent(KEPT_STATE.format(tests=str(REPO / "tests"), warehouse=str(tmp_path / "wh"))))
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    for phase, done in (("first", "KEPT STATE FIRST OK"), ("restart", "KEPT STATE RESTART OK")):
        result = subprocess.run([sys.executable, str(script), phase], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, env=env, timeout=600, cwd=tmp_path)
        print(f"--- {phase} ---\n" + "\n".join(line for line in result.stdout.splitlines() if "KEPT" in line or "LOADS" in line))
        failure = result.stdout[result.stdout.find("Traceback"):][:6000] if "Traceback" in result.stdout else result.stdout[-6000:]
        assert result.returncode == 0 and done in result.stdout, failure
