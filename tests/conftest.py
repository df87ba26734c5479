"""One real Spark session (local, Iceberg JDBC catalog on SQLite) for the whole test run."""

from __future__ import annotations

import itertools
import os
import sys
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

import eqdelete
from eqdelete import _jars
from eqdelete.tools import lakehouse

REPO = Path(__file__).resolve().parents[1]
CATALOG = "local"
#: The Iceberg release the tests run with (scripts/test.sh --pair sets it); None: the default.
ICEBERG_VERSION = os.environ.get("EQDELETE_TEST_ICEBERG") or None
#: In each virtualenv, the class archive setup.sh dumps (scripts/class_archive.py).
CLASS_ARCHIVE = "eqdelete-classes.jsa"
#: The JIT and GC of every test JVM (see _test_jvms_start_quickly); build.sbt gives the Scala
#: tests' JVM the same.
SMALL_JVM_OPTIONS = (
    # C2's compiles of Spark's generated classes cost more than they return on small tables.
    "-XX:TieredStopAtLevel=1",
    # C1 alone shrinks the default code cache from 240 MB to 48 MB, which the tests fill: the JVM
    # then flushed and recompiled code and its sweeper thread took 31% of the JVM's CPU (async-
    # profiler on the query shapes: 200 CPU-s in 163 s; 105 CPU-s in 118 s with 256 MB).
    "-XX:ReservedCodeCacheSize=256m",
    # One thread collecting a few GB: G1's parallel and concurrent workers only took CPU from
    # the stage beside (the query shapes 105 -> 90 CPU-s, 118 -> 112 s).
    "-XX:+UseSerialGC",
)


@pytest.fixture(scope="session")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("warehouse")


@pytest.fixture(scope="session")
def spark(warehouse: Path) -> SparkSession:
    # Iceberg's AWS bundle (S3FileIO's SDK) for the lakehouse tier, where setup.sh fetched it for this release.
    line = _jars.supported_line()
    aws = lakehouse.spark_jars(ICEBERG_VERSION or line.default_iceberg) if line is not None else []
    session = eqdelete.session(
        "eqdelete-tests",
        master="local[2]",
        warehouse=warehouse,
        conf={
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.shuffle.partitions": "4",
            "spark.default.parallelism": "2",
            "spark.driver.memory": os.environ.get("EQDELETE_TEST_DRIVER_MEMORY", "4g"),
            "spark.sql.session.timeZone": "UTC",
            # Spark's built-in catalog (behind spark_catalog) keeps its databases here, not in ./spark-warehouse.
            "spark.sql.warehouse.dir": (warehouse / "spark-warehouse").as_uri(),
            **({"spark.jars": ",".join(aws)} if aws else {}),
        },
        iceberg_version=ICEBERG_VERSION,
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def _test_jvms_start_quickly() -> None:
    """Every Spark JVM of the tests (this session's, and those the tests start in processes of
    their own: the command line, spark-submit, services, Connect servers) compiles with C1 only
    into a code cache that holds what it compiles, collects with one thread (SMALL_JVM_OPTIONS),
    and maps Spark's classes from an archive. C1: they run on small tables, where C2's compiles
    of Spark's generated classes took a busy core: on 2 cores, two suites side by side took 774 s
    with both tiers and 304 s with C1 alone (one suite alone 204 s and 193 s; a command line's run
    28 s and 22 s)."""
    opts = os.environ.get("SPARK_SUBMIT_OPTS", "")
    if "TieredStopAtLevel" not in opts:
        opts = f"{opts} {' '.join(SMALL_JVM_OPTIONS)}"
    # This virtualenv's class archive (scripts/class_archive.py, dumped by setup.sh): Spark's
    # classes mapped, not loaded (a short session 27 s -> 17 s). A JVM whose class path differs
    # loads its classes as usual; -Xlog keeps the JVM's notice of that off stdout, which tests read.
    archive = Path(sys.prefix) / CLASS_ARCHIVE
    if archive.is_file() and "SharedArchiveFile" not in opts and "ArchiveClassesAtExit" not in opts:
        opts = f"{opts} -XX:SharedArchiveFile={archive} -Xlog:cds*=off"
    os.environ["SPARK_SUBMIT_OPTS"] = opts.strip()


_test_jvms_start_quickly()
_names = itertools.count()


@pytest.fixture
def table_name(spark: SparkSession) -> str:
    """A fresh, unused table name in the test catalog."""
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {CATALOG}.t")
    return f"{CATALOG}.t.tbl_{os.getpid()}_{next(_names)}"


def _figures() -> dict[str, dict[str, int]]:
    """The oracle tests' counts, by name: what the terminal summary reports."""
    from test_changes import FIGURES
    from test_changes_stream import FIGURES as STREAM_FIGURES
    from test_differential import CASES

    return {"differential": CASES, "changes": FIGURES, "stream": STREAM_FIGURES}


def pytest_sessionfinish(session: pytest.Session) -> None:
    # A pytest-xdist worker hands its counts to the controller (pytest_testnodedown below).
    if hasattr(session.config, "workeroutput"):
        session.config.workeroutput["figures"] = {name: dict(counts) for name, counts in _figures().items()}


def pytest_testnodedown(node, error) -> None:  # noqa: ANN001
    for name, counts in getattr(node, "workeroutput", {}).get("figures", {}).items():
        for key, value in counts.items():
            _figures()[name][key] += value


def pytest_terminal_summary(terminalreporter) -> None:  # noqa: ANN001
    figures = _figures()
    if figures["differential"]["run"]:
        terminalreporter.write_line(f"eqdelete differential cases checked against native: {figures['differential']['run']}")
    if figures["changes"]["snapshots"]:
        changes = figures["changes"]
        terminalreporter.write_line(f"eqdelete changes checked against the difference of consecutive snapshots: "
                                    f"{changes['histories']} random histories, {changes['snapshots']} snapshots, "
                                    f"{changes['rows']} changed rows; {changes['narrowed']} snapshots' deletes "
                                    f"found among their delete keys' rows ({changes['exact']} of them by those alone, "
                                    f"{changes['in runs']} in runs read once; again with kept row images, "
                                    f"{changes['from row images']} looked up in them)")
    if figures["stream"]["snapshots"]:
        stream = figures["stream"]
        terminalreporter.write_line(f"eqdelete changes streams replayed against every snapshot: {stream['streams']} "
                                    f"streams, {stream['batches']} micro-batches, {stream['snapshots']} snapshots")


def pytest_xdist_make_scheduler(config, log):  # noqa: ANN001, ANN201
    """Under pytest-xdist's ``--dist loadscope`` (scripts/test.sh), each worker takes whole modules
    (their module-scoped tables made once) and the lakehouse tier whole: its object store, REST
    catalog and Flink cluster start once, not once per worker. (``xdist_group`` marks cannot say
    this under pytest 9.2, whose node ids pytest-xdist 3.8 no longer rewrites.)"""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ModulesAndTheLakehouse(LoadScopeScheduling):
        ordered = False

        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return "tests/lakehouse" if path.startswith("tests/lakehouse/") else path

        def _assign_work_unit(self, node) -> None:  # noqa: ANN001
            if not self.ordered:  # the longest scopes first (LONGEST_FIRST), then by their tests' count
                rank = {scope: i for i, scope in enumerate(LONGEST_FIRST)}
                ordered = sorted(self.workqueue.items(), key=lambda item: (rank.get(item[0], len(rank)), -len(item[1])))
                self.workqueue.clear()
                self.workqueue.update(ordered)
                self.ordered = True
            super()._assign_work_unit(node)

    return ModulesAndTheLakehouse(config, log)


#: The scopes of the full suite that take longest, longest first (from ``pytest --durations=0`` of
#: the full suite, summed by scope): started first, so that no long one is left for the end, one worker
#: running it while the others idle (pytest-xdist orders scopes by their tests' count alone).
LONGEST_FIRST = [  # seconds in a full suite's run (2026-12-06, 3 workers on 2 cores, as scripts/test.sh runs it)
    "tests/lakehouse",  # 972
    "tests/test_compare.py",  # 422
    "tests/test_query_shapes.py",  # 308
    "tests/test_changes_stream.py",  # 297
    "tests/test_live_index.py",  # 203
    "tests/test_changes.py",  # 178
    "tests/test_faults.py",  # 175
    "tests/test_resolve.py",  # 171
    "tests/test_key_types.py",  # 162
    "tests/test_service.py",  # 140
    "tests/test_differential.py",  # 122
    "tests/test_maintain.py",  # 100
]


def pytest_ignore_collect(collection_path: Path, config) -> bool | None:  # noqa: ANN001
    # The Connect tier (tests/connect) runs in a process of its own, when named: pyspark puts a
    # process that opened a Connect session in Connect mode, which classic sessions cannot share.
    if collection_path == Path(__file__).parent / "connect":
        return not any(str(Path(a).resolve()).startswith(str(collection_path)) for a in config.args)
    return None
