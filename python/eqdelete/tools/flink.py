"""Iceberg tables written by the real producer: Flink's Iceberg sink, through PyFlink.

Run by the Flink virtualenv (``scripts/setup.sh`` makes it), never by the Spark one::

    build/venvs/flink/bin/python python/eqdelete/tools/flink.py spec.json [--debug]

``spec.json`` names the catalog and the tables to write into it::

    {"warehouse": "/abs/dir", "namespace": "db", "result": "/abs/result.json",
     "tables": [<table spec>, ...]}

``warehouse`` is a Hadoop catalog's directory; instead, ``"catalog": {...}`` gives an Iceberg
catalog's properties as Flink SQL's ``CREATE CATALOG ... WITH (...)`` takes them, e.g. a REST
catalog with S3FileIO (``catalog-type``, ``uri``, ``warehouse``, ``io-impl``, ``s3.endpoint``, ...),
as a user configures Flink.

Each table spec has a ``name``, a ``scenario`` and a ``format_version`` (2, or 3: Flink's sink then
writes deletion vectors where v2 has position delete files), and is one of:

``upsert``
    ``columns`` (``[name, SQL type]``), ``key`` (the ``PRIMARY KEY (...) NOT ENFORCED``),
    ``partition_by`` (identity, on key columns) and ``'write.upsert.enabled'='true'``;
    ``commits`` is a list of batches of rows (lists in column order), each written in order by
    one bounded job, so one commit each. Flink writes an equality delete for every row's key; a
    key written twice in one commit also gets a position delete for its earlier row.
``cdc``
    Not upsert: ``commits`` is a list of changelogs, each a list of ``[kind, row]`` with kind
    ``+I``, ``-U``, ``+U`` or ``-D``, fed through ``from_changelog_stream`` and written by one
    bounded job (one commit at its end). Flink writes the *whole* ``-U``/``-D`` row into the
    equality delete file, with ``equality_ids`` the key only (a position delete instead when
    the key was inserted in the same commit).
``streaming_upsert``
    A checkpointed streaming job (upsert, as above): ``datagen`` emits ``seq`` = 0 .. rows-1 at
    ``rows_per_second``, a commit every checkpoint (``checkpoint_interval_ms``) and one when the
    input ends; each row is ``(k = seq % keys, [p = k % partitions,] seq, v = 'v' || seq)``, so
    keys repeat and are upserted. The rows are fixed by the spec, not by where the checkpoints
    fall. Sized by ``streaming_upsert_spec`` (tests, and larger for a benchmark). Where the
    checkpoints fall depends on the machine's load, so ``min_commits`` (optional) makes the
    writer guarantee that many snapshots: a run with fewer drops the table and writes it again
    at half the pace, twice at most, then fails naming the counts.

``upsert_spec``, ``cdc_spec`` and ``streaming_upsert_spec`` make the specs the tests use. The rows
a table must hold are computed from its spec alone by :func:`expected_rows` (plain Python: this
module imports pyflink only when it writes), and :func:`write` runs this file in the Flink
virtualenv from any other process. The result (also the last line of stdout) names each table's
snapshots with their summaries, read through the catalog by Iceberg's Java API. Every job runs
with parallelism 1, so the files written are the same on every run (streaming_upsert's commit
boundaries aside). An error is one line on stderr (``eqdelete.flink: ...``) and exit code 1
(``--debug`` adds the traceback).

The versions are pinned here, once: ``scripts/setup.sh`` reads them with ``--pins``.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

#: PyPI requirement of the Flink virtualenv (Flink 2.1 runs on Java 17 and Python 3.11).
FLINK_PIP = "apache-flink==2.1.3"
#: Maven coordinates of the jars on Flink's classpath, in build/deps/flink. Iceberg's Flink
#: runtime for Flink 2.1: 1.11.0 is the newest release that publishes one (1.12.0 publishes no
#: Flink runtime at all). Its Hadoop catalog needs Hadoop's classes, which it does not bundle:
#: the shaded client, the release pyspark 4.1 ships, so both engines use the same Hadoop.
#: Iceberg's AWS bundle (S3FileIO, of the same release) for catalogs on an object store.
FLINK_JARS = (
    "org.apache.iceberg:iceberg-flink-runtime-2.1:1.11.0",
    "org.apache.iceberg:iceberg-aws-bundle:1.11.0",
    "org.apache.hadoop:hadoop-client-api:3.4.2",
    "org.apache.hadoop:hadoop-client-runtime:3.4.2",
)

#: The checkout whose scripts/setup.sh made the Flink virtualenv (this file is python/eqdelete/tools/flink.py).
REPO = Path(__file__).resolve().parents[3]
VENV = REPO / "build" / "venvs" / "flink"
PYTHON = VENV / "bin" / "python"
JAR_DIR = REPO / "build" / "deps" / "flink"
NAMESPACE = "db"
SCENARIOS = ("upsert", "cdc", "streaming_upsert")
KINDS = ("+I", "-U", "+U", "-D")
#: SQL types a spec's columns may have, with the Python type of their values.
TYPES = {"BIGINT": int, "INT": int, "STRING": str, "DOUBLE": float, "BOOLEAN": bool}


class FlinkWriterError(RuntimeError):
    """The writer could not run or failed; the message is its one-line reason."""


def jar_paths() -> list[Path]:
    """The pinned jars, where scripts/setup.sh puts them."""
    paths = []
    for coords in FLINK_JARS:
        _, artifact, version = coords.split(":")
        paths.append(JAR_DIR / f"{artifact}-{version}.jar")
    return paths


# --- table specs and the rows they must hold (plain Python) -------------------------------------


def upsert_spec(name: str, *, partitioned: bool, format_version: int = 2) -> dict[str, Any]:
    """Three commits of upserts on (k, region): the second updates some keys several times
    (position deletes beside the equality deletes), the third re-writes keys of both earlier ones."""
    columns = [["k", "BIGINT"], ["region", "STRING"], ["v", "STRING"], ["amount", "DOUBLE"]]
    regions = ("eu", "us", "ap")
    base = [[k, regions[k % 3], f"v{k}.0", k * 1.5] for k in range(12)]
    second = ([[k, regions[k % 3], f"v{k}.1", k * 2.5] for k in (1, 2, 5, 20)]
              + [[k, regions[k % 3], f"v{k}.2", -k * 1.0] for k in (1, 5)]      # same commit, same keys
              + [[5, "eu", "v5.eu", 0.5]]                                          # same k, other region: a new key
              + [[1, regions[1], "v1.3", 0.25]])                                   # a third write in one commit
    # Keys of both data files the second commit deleted positions in (regions us and ap), and others.
    third = [[k, regions[k % 3], f"v{k}.4", k * 0.75] for k in (1, 2, 7, 20)] + [[11, regions[11 % 3], "v11.4", 11.0]]
    return {"name": name, "scenario": "upsert", "format_version": format_version, "columns": columns,
            "key": ["k", "region"], "partition_by": ["region"] if partitioned else [],
            "commits": [base, second, third]}


def cdc_spec(name: str, *, format_version: int = 2) -> dict[str, Any]:
    """Three changelogs on key id: inserts; updates and deletes of earlier rows (equality deletes
    with the whole row, one before-image with only its key, as Postgres sends it by default)
    mixed with changes of rows inserted in the same commit (position deletes); more of both."""
    columns = [["id", "BIGINT"], ["name", "STRING"], ["qty", "INT"], ["price", "DOUBLE"], ["active", "BOOLEAN"]]

    def row(i: int, version: int) -> list:
        return [i, f"n{i}.{version}", i * 10 + version, i + version / 4, (i + version) % 2 == 0]

    first = [["+I", row(i, 0)] for i in range(10)]
    second = [
        ["-U", row(1, 0)], ["+U", row(1, 1)],
        ["-U", row(2, 0)], ["+U", row(2, 1)],
        ["-D", row(3, 0)],
        ["-D", [4, None, None, None, None]],                   # a before-image holding only the key
        ["+I", row(20, 0)], ["-U", row(20, 0)], ["+U", row(20, 1)],   # changed in its own commit
        ["+I", row(21, 0)], ["-D", row(21, 0)],
        ["-U", row(1, 1)], ["+U", row(1, 2)],                   # the row updated above, again
        ["+I", row(3, 1)],                                      # deleted above, inserted again
    ]
    third = [
        ["-U", row(1, 2)], ["+U", row(1, 3)],
        ["-D", row(20, 1)],
        ["-U", row(5, 0)], ["+U", row(5, 1)],
        ["+I", row(4, 2)],
        ["-D", row(9, 0)],
    ]
    return {"name": name, "scenario": "cdc", "format_version": format_version, "columns": columns,
            "key": ["id"], "partition_by": [], "commits": [first, second, third]}


def streaming_upsert_spec(name: str, *, rows: int = 3000, keys: int = 500, checkpoints: int = 4,
                          partitions: int = 0, checkpoint_interval_ms: int = 1000,
                          format_version: int = 2, min_commits: int | None = None) -> dict[str, Any]:
    """``rows`` upserts over ``keys`` keys, paced to span about ``checkpoints`` checkpoints (so
    about that many commits, plus one for the rows after the last); ``partitions`` > 0 adds
    ``p = k % partitions`` to the key and partitions by it. ``min_commits``: the snapshots the
    writer guarantees (see the module's doc), for a test that needs several."""
    if rows < 1 or keys < 1 or checkpoints < 1 or partitions < 0:
        raise ValueError("rows, keys and checkpoints must be positive, partitions not negative")
    if min_commits is not None and not 1 <= min_commits <= rows:
        raise ValueError("min_commits must be between 1 and rows")
    per_second = max(1, math.ceil(rows / checkpoints / (checkpoint_interval_ms / 1000)))
    spec = {"name": name, "scenario": "streaming_upsert", "format_version": format_version, "rows": rows,
            "keys": keys, "partitions": partitions, "rows_per_second": per_second,
            "checkpoint_interval_ms": checkpoint_interval_ms}
    return spec if min_commits is None else {**spec, "min_commits": min_commits}


def columns_of(table: dict[str, Any]) -> list[list[str]]:
    if table["scenario"] == "streaming_upsert":
        p = [["p", "INT"]] if table.get("partitions") else []
        return [["k", "BIGINT"], *p, ["seq", "BIGINT"], ["v", "STRING"]]
    return table["columns"]


def key_of(table: dict[str, Any]) -> list[str]:
    if table["scenario"] == "streaming_upsert":
        return ["k", "p"] if table.get("partitions") else ["k"]
    return table["key"]


def partition_of(table: dict[str, Any]) -> list[str]:
    if table["scenario"] == "streaming_upsert":
        return ["p"] if table.get("partitions") else []
    return list(table.get("partition_by", []))


def create_in_spark(spark: Any, name: str, table: dict[str, Any]) -> None:
    """``table`` created as ``name`` through a Spark session, as the job's CREATE TABLE makes it
    (its columns, its key as identifier fields, its partitions, upserts), for a job that then
    writes into it (``if_not_exists``)."""
    key, part = key_of(table), partition_of(table)
    columns = ", ".join(f"{c} {t}{' NOT NULL' if c in key else ''}" for c, t in columns_of(table))
    partitioned = f" PARTITIONED BY ({', '.join(part)})" if part else ""
    spark.sql(f"CREATE TABLE {name} ({columns}) USING iceberg{partitioned} "
              f"TBLPROPERTIES ('format-version'='{table.get('format_version', 2)}', 'write.upsert.enabled'='true')")
    spark.sql(f"ALTER TABLE {name} SET IDENTIFIER FIELDS {', '.join(key)}")


def streaming_row(table: dict[str, Any], seq: int) -> tuple:
    k = seq % table["keys"]
    p = (k % table["partitions"],) if table.get("partitions") else ()
    return (k, *p, seq, f"v{seq}")


def _typed(table: dict[str, Any], row: list) -> tuple:
    columns = columns_of(table)
    if len(row) != len(columns):
        raise ValueError(f"{table['name']}: row {row} does not have the {len(columns)} columns {columns}")
    out = []
    for value, (name, sql_type) in zip(row, columns):
        kind = TYPES.get(sql_type)
        if kind is None:
            raise ValueError(f"{table['name']}: column {name} has type {sql_type}: one of {', '.join(TYPES)}")
        if value is not None and kind is float:
            value = float(value)
        elif value is not None and not (isinstance(value, kind) and not (kind is int and isinstance(value, bool))):
            raise ValueError(f"{table['name']}: {name} = {value!r} is not {sql_type}")
        out.append(value)
    return tuple(out)


def expected_rows(table: dict[str, Any]) -> list[tuple]:
    """The rows ``table`` must hold after the writer ran, from its spec alone (never from Iceberg).

    Upserts: the last row written per key. A changelog: applied in order by key, checked to be
    one Flink's sink turns into exactly these rows (a ``-U``/``-D`` only for a live key, a ``+I``
    only for an absent one, each ``+U`` right after its key's ``-U``); the non-key columns of a
    delete's before-image are not compared, as Iceberg's equality delete compares the key only.
    Sorted as the tests' ``sorted_rows`` sorts (NULLs first).
    """
    scenario = table["scenario"]
    if scenario not in SCENARIOS:
        raise ValueError(f"unknown scenario {scenario!r}: one of {', '.join(SCENARIOS)}")
    names = [c for c, _ in columns_of(table)]
    key_index = [names.index(c) for c in key_of(table)]
    live: dict[tuple, tuple] = {}
    if scenario == "streaming_upsert":
        for seq in range(table["rows"]):
            row = streaming_row(table, seq)
            live[tuple(row[i] for i in key_index)] = row
    elif scenario == "upsert":
        for commit in table["commits"]:
            for raw in commit:
                row = _typed(table, raw)
                live[tuple(row[i] for i in key_index)] = row
    else:
        for n, commit in enumerate(table["commits"]):
            pending = None  # the key of a -U waiting for its +U
            for kind, raw in commit:
                if kind not in KINDS:
                    raise ValueError(f"{table['name']}: unknown row kind {kind!r}: one of {', '.join(KINDS)}")
                row = _typed(table, raw)
                key = tuple(row[i] for i in key_index)
                if pending is not None and (kind != "+U" or key != pending):
                    raise ValueError(f"{table['name']} commit {n}: -U of {pending} not followed by its +U")
                if kind in ("-U", "-D"):
                    if key not in live:
                        raise ValueError(f"{table['name']} commit {n}: {kind} of {key}, which is not live")
                    del live[key]
                    pending = key if kind == "-U" else None
                elif kind == "+I":
                    if key in live:
                        raise ValueError(f"{table['name']} commit {n}: +I of {key}, which is live (use -U/+U)")
                    live[key] = row
                else:
                    if pending is None:
                        raise ValueError(f"{table['name']} commit {n}: +U of {key} without its -U")
                    live[key] = row
                    pending = None
            if pending is not None:
                raise ValueError(f"{table['name']} commit {n}: -U of {pending} not followed by its +U")
    return sorted(live.values(), key=lambda r: tuple((v is not None, v) for v in r))


# --- running the writer from another process ----------------------------------------------------


class FlinkRun:
    """A writer process under way (``start``): ``wait`` for its result."""

    def __init__(self, process: subprocess.Popen, spec: dict[str, Any], spec_path: Path, log_dir: Path,
                 stderr: Path, debug: bool) -> None:
        self.process, self.spec, self.spec_path, self.log_dir, self.debug = process, spec, spec_path, log_dir, debug
        self.stderr = stderr

    def running(self) -> bool:
        return self.process.poll() is None

    def wait(self, timeout: float = 900) -> dict[str, Any]:
        """The result dict once the writer ends; FlinkWriterError with its reason (and, with
        ``debug``, its traceback) when it failed or did not end within ``timeout`` seconds (it is
        killed then, its JVM too)."""
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired as e:
            self.stop()
            raise FlinkWriterError(f"Flink writer did not finish in {timeout:.0f} s: {self.spec_path}, "
                                   f"Flink's log in {self.log_dir}") from e
        if self.process.returncode != 0:
            lines = self.stderr.read_text(errors="replace").strip().splitlines() or [f"exit code {self.process.returncode}, no message"]
            detail = "\n".join(lines[-60:]) if self.debug else lines[-1]
            raise FlinkWriterError(f"Flink writer failed ({self.spec_path}, Flink's log in {self.log_dir}):\n{detail}")
        return json.loads(Path(self.spec["result"]).read_text())

    def stop(self) -> None:
        """Kill the writer and its gateway JVM, if still running."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, 9)
            self.process.wait()


def start(spec: dict[str, Any], workdir: Path, *, debug: bool = True) -> FlinkRun:
    """Start writing ``spec``'s tables by running this file in the Flink virtualenv, in the
    background. Raises FlinkWriterError when it cannot start, e.g. when scripts/setup.sh has not
    made the Flink virtualenv yet."""
    if not PYTHON.exists():
        raise FlinkWriterError(f"no Flink virtualenv at {PYTHON.parent.parent}: run scripts/setup.sh")
    workdir = Path(workdir).resolve()  # the job runs in it: paths relative to the caller's would not be found
    workdir.mkdir(parents=True, exist_ok=True)
    spec = {**spec, "result": str(workdir / "flink-result.json")}
    spec_path = workdir / "flink-spec.json"
    spec_path.write_text(json.dumps(spec, indent=1))
    # The Flink virtualenv's own Python, without the calling (Spark) process's Python and Spark
    # settings; Flink's log (the jobs' exceptions in full) beside the spec.
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYSPARK_", "SPARK_", "PYTHON", "VIRTUAL_ENV", "HADOOP_"))}
    log_dir = workdir / "flink-log"
    env["FLINK_LOG_DIR"] = str(log_dir)
    args = [str(PYTHON), str(Path(__file__).resolve()), str(spec_path)] + (["--debug"] if debug else [])
    # A session of its own, so a timeout ends the gateway JVM too, not only this Python. Its output
    # goes to files: a pipe nobody reads while the job runs would stop it once full.
    stderr = workdir / "flink-stderr.txt"
    with open(workdir / "flink-stdout.txt", "wb") as out, open(stderr, "wb") as err:
        process = subprocess.Popen(args, stdout=out, stderr=err, env=env, cwd=workdir, start_new_session=True)
    return FlinkRun(process, spec, spec_path, log_dir, stderr, debug)


def write(spec: dict[str, Any], workdir: Path, *, timeout: float = 900, debug: bool = True) -> dict[str, Any]:
    """Write ``spec``'s tables (``start``, then ``wait``); the result dict."""
    return start(spec, workdir, debug=debug).wait(timeout)


# --- the writer itself (Flink virtualenv only) ---------------------------------------------------


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _ddl(catalog: str, namespace: str, table: dict[str, Any]) -> str:
    columns = ", ".join(f"{_quote(c)} {t}" for c, t in columns_of(table))
    key = ", ".join(_quote(c) for c in key_of(table))
    part = partition_of(table)
    partitioned = f" PARTITIONED BY ({', '.join(_quote(c) for c in part)})" if part else ""
    upsert = "false" if table["scenario"] == "cdc" else "true"
    exists = " IF NOT EXISTS" if table.get("if_not_exists") else ""  # a table seeded before the job
    return (f"CREATE TABLE{exists} {catalog}.{_quote(namespace)}.{_quote(table['name'])} "
            f"({columns}, PRIMARY KEY ({key}) NOT ENFORCED){partitioned} "
            f"WITH ('format-version'='{table.get('format_version', 2)}', 'write.upsert.enabled'='{upsert}')")


def catalog_properties(spec: dict[str, Any]) -> dict[str, str]:
    """The Iceberg catalog properties of a spec, as Flink SQL's CREATE CATALOG takes them."""
    if "catalog" in spec:
        return {str(k): str(v) for k, v in spec["catalog"].items()}
    return {"catalog-type": "hadoop", "warehouse": Path(spec["warehouse"]).resolve().as_uri()}


def _snapshots(catalog: Any, namespace: str, name: str) -> dict[str, Any]:
    """The table's snapshots with their summaries, from the catalog (Iceberg's Java API)."""
    from pyflink.java_gateway import get_gateway

    jvm = get_gateway().jvm
    table = catalog.loadTable(jvm.org.apache.iceberg.catalog.TableIdentifier.parse(f"{namespace}.{name}"))
    snaps = [{"snapshot_id": s.snapshotId(), "sequence_number": s.sequenceNumber(), "operation": s.operation(),
              "timestamp_ms": s.timestampMillis(), "summary": dict(s.summary().items())}
             for s in table.snapshots()]
    current = table.currentSnapshot()
    return {"location": table.location(), "format_version": jvm.org.apache.iceberg.TableUtil.formatVersion(table),
            "current_snapshot_id": None if current is None else current.snapshotId(), "snapshots": snaps}


class _Flink:
    """One PyFlink gateway (JVM) for every table of a spec; a local mini cluster per job."""

    CATALOG = "hc"

    def __init__(self, properties: dict[str, str]) -> None:
        missing = [str(p) for p in jar_paths() if not p.is_file()]
        if missing:
            raise FlinkWriterError(f"missing Flink jars {', '.join(missing)}: run scripts/setup.sh")
        # On the gateway JVM's own classpath (as a Flink installation's lib/ and HADOOP_CLASSPATH
        # would have them), so Iceberg's catalog and Hadoop's FileSystem share one class loader.
        os.environ["HADOOP_CLASSPATH"] = os.pathsep.join(str(p) for p in jar_paths())
        try:
            from pyflink.common import Configuration
            from pyflink.datastream import StreamExecutionEnvironment
            from pyflink.table import StreamTableEnvironment
        except ImportError as e:
            raise FlinkWriterError(f"pyflink is not importable by {sys.executable} ({e}): run scripts/setup.sh") from e
        self.properties = properties
        self.checkpoints = Path(tempfile.mkdtemp(prefix="flink-checkpoints-")).resolve()
        self._stream_classes = (StreamExecutionEnvironment, StreamTableEnvironment, Configuration)
        try:
            _, self.ddl = self.stream(None)
        except Exception as e:  # noqa: BLE001 - Java missing or broken: say so in one line
            raise FlinkWriterError(f"Flink could not start its JVM ({_one_line(e)}); "
                                   "check Java 17 (JAVA_HOME/PATH) and run scripts/setup.sh") from e

    def _catalog(self, tenv) -> None:  # noqa: ANN001
        options = ", ".join(f"'{k}'='{v}'" for k, v in {"type": "iceberg", **self.properties}.items())
        tenv.execute_sql(f"CREATE CATALOG {self.CATALOG} WITH ({options})")

    def java_catalog(self) -> Any:
        """The same catalog through Iceberg's Java API (Flink's catalog-type is Iceberg's type)."""
        from pyflink.java_gateway import get_gateway

        jvm = get_gateway().jvm
        options = jvm.java.util.HashMap()
        for key, value in self.properties.items():
            options.put("type" if key == "catalog-type" else key, value)
        return jvm.org.apache.iceberg.CatalogUtil.buildIcebergCatalog(
            "eqdelete-flink", options, jvm.org.apache.hadoop.conf.Configuration())

    def stream(self, checkpoint_interval_ms: int | None):  # noqa: ANN201
        """A streaming table environment on the Hadoop catalog, parallelism 1. Every job runs in
        streaming mode, bounded ones too: the batch runtime sorts a keyed input by key, and that
        sort does not keep the order of rows with the same key, so the last write of a key
        written twice in one commit would not be the one that stays."""
        stream_env_class, stream_table_env_class, configuration = self._stream_classes
        conf = configuration()
        conf.set_string("parallelism.default", "1")
        # A failed job fails the writer (with checkpointing, Flink would restart it for ever).
        conf.set_string("restart-strategy.type", "none")
        if checkpoint_interval_ms:
            # Checkpoints on disk, not in the job manager's memory (5 MB at most per state).
            conf.set_string("execution.checkpointing.storage", "filesystem")
            conf.set_string("execution.checkpointing.dir", self.checkpoints.as_uri())
        env = stream_env_class.get_execution_environment(conf)
        env.set_parallelism(1)
        if checkpoint_interval_ms:
            env.enable_checkpointing(checkpoint_interval_ms)
        tenv = stream_table_env_class.create(env)
        tenv.get_config().set("table.exec.resource.default-parallelism", "1")
        # Pass the changelog through as written: no upsert materializer before the keyed sink.
        tenv.get_config().set("table.exec.sink.upsert-materialize", "NONE")
        self._catalog(tenv)
        return env, tenv

    def create(self, namespace: str, table: dict[str, Any]) -> str:
        self.ddl.execute_sql(f"CREATE DATABASE IF NOT EXISTS {self.CATALOG}.{_quote(namespace)}")
        self.ddl.execute_sql(_ddl(self.CATALOG, namespace, table))
        return f"{self.CATALOG}.{_quote(namespace)}.{_quote(table['name'])}"

    def drop(self, namespace: str, table: dict[str, Any]) -> None:
        """Through Flink's catalog, so its cache forgets the table too (Iceberg purges the files)."""
        self.ddl.execute_sql(f"DROP TABLE {self.CATALOG}.{_quote(namespace)}.{_quote(table['name'])}")

    def upsert(self, target: str, table: dict[str, Any]) -> None:
        for commit in table["commits"]:
            self._changelog(target, table, [["+I", row] for row in commit])

    def cdc(self, target: str, table: dict[str, Any]) -> None:
        for commit in table["commits"]:
            self._changelog(target, table, commit)

    def _changelog(self, target: str, table: dict[str, Any], commit: list) -> None:
        """One bounded job, so one commit: the rows in order from one collection source. (Not
        INSERT ... VALUES: the planner makes a VALUES of expressions a UNION of one source per
        row, whose rows reach the sink in any order.)"""
        from pyflink.common import Row, Types
        from pyflink.common.types import RowKind

        kinds = {"+I": RowKind.INSERT, "-U": RowKind.UPDATE_BEFORE, "+U": RowKind.UPDATE_AFTER, "-D": RowKind.DELETE}
        flink_types = {"BIGINT": Types.LONG(), "INT": Types.INT(), "STRING": Types.STRING(),
                       "DOUBLE": Types.DOUBLE(), "BOOLEAN": Types.BOOLEAN()}
        names = [c for c, _ in columns_of(table)]
        row_type = Types.ROW_NAMED(names, [flink_types[t] for _, t in columns_of(table)])
        rows = []
        for kind, raw in commit:
            row = Row(*_typed(table, raw))
            row.set_row_kind(kinds[kind])
            rows.append(row)
        env, tenv = self.stream(None)
        changelog = tenv.from_changelog_stream(env.from_collection(rows, type_info=row_type))
        changelog.execute_insert(target).wait()

    def streaming_upsert(self, target: str, table: dict[str, Any]) -> None:
        """datagen's sequence generator keeps the numbers it has still to emit in its state (8
        bytes each, in every checkpoint), so it counts batches of ``fanout`` and an UNNEST of
        0 .. fanout-1 expands each, in order: seq = batch * fanout + j."""
        _, tenv = self.stream(int(table["checkpoint_interval_ms"]))
        rows, keys, per_second = int(table["rows"]), int(table["keys"]), int(table["rows_per_second"])
        fanout = max(1, min(1000, per_second // 20))  # 20 batches a second at least
        batches = math.ceil(rows / fanout)
        tenv.execute_sql(
            "CREATE TEMPORARY TABLE batches (b BIGINT) WITH ('connector'='datagen', "
            f"'rows-per-second'='{math.ceil(per_second / fanout)}', 'fields.b.kind'='sequence', "
            f"'fields.b.start'='0', 'fields.b.end'='{batches - 1}')")
        offsets = ", ".join(str(j) for j in range(fanout))
        tenv.execute_sql(f"CREATE TEMPORARY VIEW seqs AS SELECT b * {fanout} + j AS seq FROM batches "
                         f"CROSS JOIN UNNEST(ARRAY[{offsets}]) AS t(j)")
        p = f", CAST(MOD(MOD(seq, {keys}), {int(table['partitions'])}) AS INT)" if table.get("partitions") else ""
        tenv.execute_sql(f"INSERT INTO {target} SELECT MOD(seq, {keys}){p}, seq, CONCAT('v', CAST(seq AS STRING)) "
                         f"FROM seqs WHERE seq < {rows}").wait()

    def close(self) -> None:
        shutil.rmtree(self.checkpoints, ignore_errors=True)


def _one_line(error: BaseException) -> str:
    """The most telling line of an error: for a Java exception, its deepest cause."""
    text = str(error).strip()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    causes = [ln for ln in lines if ln.startswith("Caused by:")]
    if causes:
        return causes[-1][len("Caused by:"):].strip()
    java = [ln for ln in lines if "Exception" in ln or "Error" in ln]
    return (java[0] if java else lines[0] if lines else type(error).__name__)[:500]


def _write_table(flink: "_Flink", catalog: Any, namespace: str, table: dict[str, Any],
                 attempts: int = 3) -> tuple[dict[str, Any], int]:
    """``table`` created and written; with ``min_commits``, rewritten at half the pace while its
    checkpoints made fewer snapshots (a loaded machine checkpoints less often than asked). The
    table is one this run just created, so dropping it loses nothing."""
    wanted = table.get("min_commits")
    if wanted is not None and table["scenario"] != "streaming_upsert":
        raise FlinkWriterError(f"table {table['name']!r}: min_commits is for streaming_upsert tables (a bounded job commits once)")
    if wanted is not None and table.get("if_not_exists"):
        raise FlinkWriterError(f"table {table['name']!r}: min_commits would drop a table seeded before the job")
    for attempt in range(1, attempts + 1):
        target = flink.create(namespace, table)
        getattr(flink, table["scenario"])(target, table)
        snapshots = _snapshots(catalog, namespace, table["name"])
        if wanted is None or len(snapshots["snapshots"]) >= wanted:
            return snapshots, attempt
        if attempt == attempts:
            raise FlinkWriterError(f"table {table['name']!r}: {len(snapshots['snapshots'])} snapshots after "
                                   f"{attempts} runs, at least {wanted} asked (min_commits)")
        flink.drop(namespace, table)
        table = {**table, "rows_per_second": max(1, int(table["rows_per_second"]) // 2)}
    raise AssertionError("unreachable")


def run_spec(spec: dict[str, Any]) -> dict[str, Any]:
    properties = catalog_properties(spec)
    namespace = spec.get("namespace", NAMESPACE)
    tables = spec["tables"]
    for table in tables:
        if table.get("scenario") not in SCENARIOS:
            raise FlinkWriterError(f"table {table.get('name')!r}: scenario must be one of {', '.join(SCENARIOS)}")
        expected_rows(table)  # a spec whose rows cannot be modelled is refused before Flink starts
    started = time.monotonic()
    flink = _Flink(properties)
    result: dict[str, Any] = {"catalog": {k: v for k, v in properties.items() if "secret" not in k},
                              "namespace": namespace, "tables": {},
                              "flink_start_seconds": round(time.monotonic() - started, 1)}
    try:
        catalog = flink.java_catalog()
        for table in tables:
            began = time.monotonic()
            snapshots, attempts = _write_table(flink, catalog, namespace, table)
            result["tables"][table["name"]] = {**snapshots, "scenario": table["scenario"], "attempts": attempts,
                                               "seconds": round(time.monotonic() - began, 1)}
    finally:
        flink.close()
    result["seconds"] = round(time.monotonic() - started, 1)
    return result


def main(argv: list[str]) -> int:
    if argv[:1] == ["--pins"]:  # for scripts/setup.sh: one "pip REQUIREMENT" and a "jar COORDS" each
        print(f"pip {FLINK_PIP}")
        for coords in FLINK_JARS:
            print(f"jar {coords}")
        return 0
    debug = "--debug" in argv
    paths = [a for a in argv if a != "--debug"]
    if len(paths) != 1:
        print("usage: flink.py SPEC.json [--debug] | --pins", file=sys.stderr)
        return 2
    try:
        spec = json.loads(Path(paths[0]).read_text())
        result = run_spec(spec)
    except Exception as e:  # noqa: BLE001 - one line, the traceback only with --debug
        if debug:
            traceback.print_exc()
        message = str(e) if isinstance(e, (FlinkWriterError, ValueError, OSError)) else _one_line(e)
        print(f"eqdelete.flink: {message}", file=sys.stderr)
        return 1
    text = json.dumps(result)
    if spec.get("result"):
        Path(spec["result"]).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
