"""Every public function and CLI command over a real Spark Connect server, compared with a
classic session's results on the same warehouse (``classic_twin.py``, a process of its own)."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import threading
import warnings
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import eqdelete
from eqdelete import RemoteSessionWarning
from eqdelete.tools.cdc import CdcSpec, generate

from connect_cases import QUERY, STRATEGIES, changes_fingerprint, fingerprint_sql, spec

HERE = Path(__file__).resolve().parent
TABLE = "local.db.connect_cdc"
CLASSIC_TABLE = "local.db.classic_cdc"


def _same_decisions(connect: list, classic: list, strategy: str) -> None:
    assert [dataclasses.asdict(d) for d in connect] == classic
    # Under native eqdelete steps aside and records nothing; else one read, one decision.
    assert len(connect) == (0 if strategy == "native" else 1)


@pytest.fixture(scope="module")
def generated(spark: SparkSession) -> str:
    spark.sql("CREATE NAMESPACE IF NOT EXISTS local.db")
    generate(spark, spec(TABLE), progress=None)
    return TABLE


@pytest.fixture(scope="module")
def classic(generated: str, warehouse: Path, python: str) -> dict:
    """The classic session's results, after the Connect side generated its table."""
    # Without the Connect mode pyspark put this process in.
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE", "SPARK_LOCAL_REMOTE")}
    done = subprocess.run([python, str(HERE / "classic_twin.py"), str(warehouse), generated, CLASSIC_TABLE],
                          capture_output=True, text=True, cwd=HERE, env=env, timeout=900)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_session_reaches_the_extension(spark: SparkSession) -> None:
    assert type(spark).__module__.startswith("pyspark.sql.connect")
    assert "(Spark 4." in spark.sql("SELECT eqdelete_version()").first()[0]


def test_toggles(spark: SparkSession) -> None:
    assert eqdelete.get_strategy(spark) == "auto"
    eqdelete.set_strategy(spark, " Filter ")
    assert eqdelete.get_strategy(spark) == "filter"
    with eqdelete.use_strategy(spark, "join"):
        assert eqdelete.get_strategy(spark) == "join"
    assert eqdelete.get_strategy(spark) == "filter"
    spark.conf.unset("spark.eqdelete.strategy")
    with eqdelete.use_conf(spark, [("spark.eqdelete.enabled", "false")]):
        assert spark.conf.get("spark.eqdelete.enabled") == "false"
    eqdelete.set_enabled(spark, True)
    assert spark.conf.get("spark.eqdelete.enabled") == "true"
    with pytest.raises(ValueError, match="one of auto, filter, join, native"):
        eqdelete.set_strategy(spark, "fast")


def test_generate_makes_the_table_a_classic_session_makes(spark: SparkSession, generated: str, classic: dict) -> None:
    connect_summary = dataclasses.asdict(eqdelete.summarize(spark, generated))
    classic_summary = classic["classic_table"]["summary"]
    for summary in (connect_summary, classic_summary):
        summary.pop("table"), summary.pop("native_seconds")
        for group in summary["groups"]:
            group.pop("bytes")  # Parquet footers name the writer's session
    assert connect_summary == classic_summary
    assert [int(v) for v in spark.sql(fingerprint_sql(generated)).first()] == classic["classic_table"]["fingerprint"]
    assert connect_summary["native_rows"] == spec(generated).expected(spark).count()


def test_decisions_and_last_decisions_match_classic(spark: SparkSession, generated: str, classic: dict) -> None:
    for strategy in STRATEGIES:
        with eqdelete.use_strategy(spark, strategy):
            df = spark.sql(QUERY.format(t=generated))
            _same_decisions(eqdelete.decisions(df), classic["decisions"][strategy], strategy)
            df.agg(F.count("*")).collect()
            last = eqdelete.last_decisions(spark)
            _same_decisions(last, classic["last_decisions"][strategy], strategy)
            # Asking is not a query of its own: the answer stays.
            assert eqdelete.last_decisions(spark) == last
    assert {d["strategy"] for s in ("filter", "join") for d in classic["decisions"][s]} == {"filter", "join"}


def test_summarize_matches_classic(spark: SparkSession, generated: str, classic: dict) -> None:
    connect = dataclasses.asdict(eqdelete.summarize(spark, generated))
    expected = classic["summary"]
    connect.pop("native_seconds"), expected.pop("native_seconds")
    assert connect == expected
    assert "equality deletes" in eqdelete.summarize(spark, generated).render()


def test_compare_over_connect(spark: SparkSession, generated: str) -> None:
    comparison = eqdelete.compare(spark, QUERY.format(t=generated), runs=1, warmup=0, progress=None)
    assert comparison.identical
    assert [r.strategy for r in comparison.runs] == list(eqdelete.STRATEGIES)
    assert all(r.peak_heap_bytes is None and r.seconds[0] > 0 for r in comparison.runs)
    assert comparison.by_strategy("filter").plan == "filter"
    assert "peak heap MB" in comparison.render()
    with pytest.raises(eqdelete.NoEqualityDeletesError):
        eqdelete.compare(spark, "SELECT 1 AS one", runs=1, warmup=0, progress=None)


def test_resolve_dry_run_matches_classic(spark: SparkSession, generated: str, classic: dict) -> None:
    connect = dataclasses.asdict(eqdelete.resolve_equality_deletes(spark, generated, dry_run=True))
    expected = classic["resolve_dry_run"]
    connect.pop("seconds"), expected.pop("seconds")
    assert connect == expected
    assert connect["rows_resolved"] > 0 and connect["snapshot_id"] is None


def test_status_matches_classic(spark: SparkSession, generated: str, classic: dict) -> None:
    [status] = eqdelete.status(spark, generated)
    [twin] = classic["status"]
    assert status.equality_delete_files > 0 and status.error is None
    assert {**dataclasses.asdict(status), "lag_seconds": 0} == {**twin, "lag_seconds": 0}


def test_changes_match_classic(spark: SparkSession, generated: str, classic: dict) -> None:
    fingerprint = changes_fingerprint(eqdelete.changes(spark, generated))
    assert fingerprint == classic["changes"]
    assert {row[0] for row in fingerprint} == {"INSERT", "DELETE"}


def test_changes_stream_over_connect(spark: SparkSession, generated: str, classic: dict, tmp_path: Path) -> None:
    # readStream from the client: the server's source, a snapshot a micro-batch, into a memory sink.
    query = (eqdelete.changes_stream(spark, generated, max_snapshots_per_trigger=1).writeStream.format("memory")
             .queryName("connect_changes").option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    assert query.lastProgress is not None and query.exception() is None
    assert changes_fingerprint(spark.table("connect_changes")) == classic["changes"]


def test_apply_changes_over_connect(spark: SparkSession, generated: str) -> None:
    # A copy brought up to its source, then a second copy fed a DataFrame of the changes under a mark.
    def same(copy: str) -> bool:
        spark.sql(f"REFRESH TABLE {copy}")
        left, right = spark.table(copy), spark.table(generated)
        return left.exceptAll(right).isEmpty() and right.exceptAll(left).isEmpty()

    for copy in ("local.db.connect_copy", "local.db.connect_copy_2"):
        spark.sql(f"CREATE TABLE {copy} USING iceberg AS SELECT * FROM {generated} LIMIT 0")
    first = eqdelete.apply_changes_from(spark, generated, "local.db.connect_copy")
    assert first.snapshot_id is not None and first.rows_inserted > 0 and same("local.db.connect_copy")
    assert "its current one" in eqdelete.apply_changes_from(spark, generated, "local.db.connect_copy").skipped
    applied = eqdelete.apply_changes(eqdelete.changes(spark, generated), "local.db.connect_copy_2", writer_id="connect",
                                     batch_id=0)
    assert applied.rows_inserted == first.rows_inserted and same("local.db.connect_copy_2")
    again = eqdelete.apply_changes(eqdelete.changes(spark, generated), "local.db.connect_copy_2", writer_id="connect",
                                   batch_id=0)
    assert again.snapshot_id is None and "is applied" in again.skipped
    # What it refuses, in one line as in a classic session: a DELETE of a row the copy lacks, a
    # NULL into a NOT NULL column.
    source = "local.db.connect_refusing"
    spark.sql(f"CREATE TABLE {source} (k BIGINT, v STRING) USING iceberg")
    spark.sql(f"INSERT INTO {source} VALUES (1, 'a')")
    first = spark.sql(f"SELECT snapshot_id FROM {source}.snapshots").first()[0]
    spark.sql(f"INSERT INTO {source} VALUES (NULL, 'n')")
    spark.sql(f"DELETE FROM {source} WHERE k = 1")
    spark.sql("CREATE TABLE local.db.connect_refused (k BIGINT NOT NULL, v STRING) USING iceberg")
    for changes, says in ((eqdelete.changes(spark, source, start_snapshot_id=first).where("_change_type = 'DELETE'"), "does not hold"),
                          (eqdelete.changes(spark, source).where("_change_type = 'INSERT'"), "declares NOT NULL")):
        with pytest.raises(eqdelete.ApplyChangesError) as refused:
            eqdelete.apply_changes(changes, "local.db.connect_refused")
        assert says in str(refused.value) and "\n" not in str(refused.value), refused.value
    assert spark.table("local.db.connect_refused").count() == 0


def test_write_and_resolve_over_connect(spark: SparkSession) -> None:
    table = "local.db.connect_writes"
    generate(spark, CdcSpec(table, rows=500, commits=1), progress=None)
    before = spark.table(table).count()
    keys = [r["k1"] for r in spark.table(table).orderBy("k1").limit(5).collect()]
    commit = eqdelete.write_equality_deletes(spark, table, ["k1"], [(k,) for k in keys[:3]])
    assert commit.delete_files == 1 and commit.data_files == 0
    frame = spark.table(table).where(F.col("k1").isin(keys[3:]))
    upsert = eqdelete.write_equality_deletes(spark, table, ["k1"], frame.select("k1"), inserts=frame)
    assert upsert.data_files == 1 and upsert.snapshot_id != commit.snapshot_id
    assert spark.table(table).count() == before - 3
    result = eqdelete.resolve_equality_deletes(spark, table)
    assert result.committed and result.rows_resolved >= 5
    files = {r["content"] for r in spark.sql(f"SELECT * FROM eqdelete_table_files('{table}')").collect()}
    assert "equality deletes" not in files
    assert spark.table(table).count() == before - 3
    with pytest.raises(ValueError, match="key_columns"):
        eqdelete.write_equality_deletes(spark, table, [], [(1,)])


def test_maintain_over_connect(spark: SparkSession) -> None:
    table = "local.db.connect_maintained"
    generate(spark, CdcSpec(table, rows=500, commits=2), progress=None)
    before = spark.table(table).count()
    first = eqdelete.maintain_round(spark, table)
    assert first.committed and first.rows_resolved > 0 and first.equality_delete_files_live == 0
    keys = [r["k1"] for r in spark.table(table).orderBy("k1").limit(2).collect()]
    eqdelete.write_equality_deletes(spark, table, ["k1"], [(k,) for k in keys])
    summary = eqdelete.maintain(spark, table, interval=0, rounds=2)
    assert (summary.rounds, summary.rounds_committed, summary.rows_resolved) == (2, 1, 2)
    assert spark.table(table).count() == before - 2
    assert "equality deletes" not in {r["content"] for r in spark.sql(f"SELECT * FROM eqdelete_table_files('{table}')").collect()}
    # The many-table service over Connect: its rounds are the server's CALLs.
    eqdelete.write_equality_deletes(spark, table, ["k1"], [(k,) for k in keys[:1]])
    stop = threading.Event()
    served = eqdelete.maintain_tables(spark, "local.db.connect_maint*", interval=0, stop=stop,
                                      on_round=lambda r: stop.set() if r.committed else None)
    assert served.tables[table].rounds_committed == 1 and served.tables[table].failures == 0


def test_generate_leaves_nothing_behind_when_it_fails(spark: SparkSession) -> None:
    table = "local.db.connect_broken"
    broken = CdcSpec(table, rows=100, commits=1, extra_properties={"write.format.default": "no-such-format"})
    with pytest.raises(Exception, match="no-such-format|NO-SUCH-FORMAT|format"):
        generate(spark, broken, progress=None)
    assert not spark.catalog.tableExists(table)


def test_configure_on_a_remote_builder_says_what_the_server_needs(server: str) -> None:
    builder = SparkSession.builder.remote(server)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        eqdelete.configure(builder, strategy="join")
    [warning] = [w for w in caught if issubclass(w.category, RemoteSessionWarning)]
    text = str(warning.message)
    assert "eqdelete.EqualityDeleteExtensions" in text and "spark.jars" in text and "connect-server" in text
    assert builder._options["spark.eqdelete.strategy"] == "join"  # noqa: SLF001
    assert "spark.jars" not in builder._options  # noqa: SLF001


def test_sql_forms(spark: SparkSession, generated: str) -> None:
    described = "\n".join(r[0] for r in spark.sql("DESCRIBE FUNCTION eqdelete_decisions").collect())
    assert "planned and not run" in described
    query = QUERY.format(t=generated).replace("'", "\\'")
    with eqdelete.use_strategy(spark, "filter"):
        rows = spark.sql(f"SELECT strategy, delete_files FROM eqdelete_decisions('{query}')").collect()
    assert [r["strategy"] for r in rows] == ["filter"] and rows[0]["delete_files"] > 0
    with pytest.raises(Exception, match="constant string"):
        spark.sql("SELECT * FROM eqdelete_decisions(1)").collect()


@pytest.mark.parametrize("command", [
    ["generate", "--table", "local.db.cli_cdc", "--rows", "800", "--commits", "2", "--replace"],
    ["compare", "--sql", "SELECT count(*) FROM local.db.cli_cdc", "--runs", "1", "--warmup", "0"],
    ["resolve", "--table", "local.db.cli_cdc", "--dry-run"],
    ["maintain", "--table", "local.db.cli_cdc", "--once"],
    ["status", "--tables", "local.db.cli_cdc"],
])
def test_cli_over_connect(server: str, python: str, command: list[str]) -> None:
    done = subprocess.run([python, "-m", "eqdelete", *command, "--remote", server], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    expected = {"generate": "equality deletes", "compare": "results: identical", "resolve": "dry run on",
                "maintain": '"round": 1', "status": "native/floor"}[command[0]]
    assert expected in done.stdout


LOCAL_SERVER_JOB = """
import sys, warnings
from pyspark.sql import SparkSession
import eqdelete
from eqdelete import RemoteSessionWarning

warnings.simplefilter("error", RemoteSessionWarning)
how, warehouse = sys.argv[1:]
builder = SparkSession.builder.config("spark.ui.enabled", "false")
builder = builder.remote("local[1]") if how == "remote" else builder.master("local[1]").config("spark.api.mode", "connect")
spark = eqdelete.configure(builder, warehouse=warehouse).getOrCreate()
print(type(spark).__module__)
print(spark.sql("SELECT eqdelete_version()").first()[0])
spark.sql("CREATE NAMESPACE IF NOT EXISTS local.db")
print(spark.sql("SHOW NAMESPACES IN local").count())
spark.stop()
"""


@pytest.mark.parametrize("how", ["remote", "api_mode"])
def test_a_builder_starting_its_own_local_server_gets_eqdelete(how: str, tmp_path: Path, python: str) -> None:
    """remote("local[...]") and spark.api.mode=connect start a Connect server in the process's JVM
    from the builder's settings: configure() sets it up as a classic session, with no warning."""
    (tmp_path / "job.py").write_text(LOCAL_SERVER_JOB)
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE", "SPARK_LOCAL_REMOTE")}
    # pyspark's local server listens on 15002, where its client looks, unless SPARK_TESTING is set:
    # then on a free port, which the client asks the JVM for (a user's own server may hold 15002).
    env["SPARK_TESTING"] = "1"
    done = subprocess.run([python, str(tmp_path / "job.py"), how, str(tmp_path / "warehouse")],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    module, version, namespaces = done.stdout.strip().splitlines()[-3:]
    assert module.startswith("pyspark.sql.connect") and "(Spark 4." in version and int(namespaces) >= 1


def test_connect_server_command_stops_its_server_when_stopped(tmp_path: Path, python: str) -> None:
    """SIGTERM to ``python -m eqdelete connect-server`` stops the server's JVM too, port and all."""
    import signal
    import socket
    import time

    from conftest import _free_port

    port = _free_port()
    command = [python, "-m", "eqdelete", "connect-server", "--port", str(port), "--master", "local[1]",
               "--driver-memory", "1g", "--warehouse", str(tmp_path / "warehouse"), "--conf", "spark.ui.enabled=false"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 180
        while True:
            assert process.poll() is None, process.communicate()[1][-3000:]
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                assert time.monotonic() < deadline, "the server did not listen in 180 s"
                time.sleep(1)
        jvms = Path(f"/proc/{process.pid}/task/{process.pid}/children").read_text().split()
        assert len(jvms) == 1
        process.send_signal(signal.SIGTERM)  # to the command only, as a supervisor sends it
        _, stderr = process.communicate(timeout=90)
        assert process.returncode == 0, stderr[-3000:]
        assert "SIGTERM: stopping the Spark Connect server" in stderr
        assert not Path(f"/proc/{jvms[0]}").exists() or "zombie" in Path(f"/proc/{jvms[0]}/status").read_text()
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
    finally:
        if process.poll() is None:
            process.kill()
