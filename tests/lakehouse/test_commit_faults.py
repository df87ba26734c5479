"""The fault tier: ``resolve``, ``maintain --once``, ``maintain_round`` and ``CALL`` against a REST
catalog and an object store behind forwarding proxies of the tests' own (on loopback, in front of
each server: ``eqdelete.tools.forwarding_proxy``), which lose, refuse, repeat or delay chosen
requests as load balancers, gateways and Iceberg's own HTTP client do.

The sequence that once left tables unreadable is here on v2 and v3 through every entry point: the
catalog commits, the client never hears it (the connection dropped, or a 503 with ``Retry-After``
that Iceberg's client answers by sending the commit again), the commit is sent again and refused
with 409 because the table's head has moved (by that very commit, or by a writer's in between).

After each fault the table is checked with the proxies passing everything:
- every file the current snapshot references is on the store (read there directly);
- no key is live twice, and the rows are those the fixture computes from what it wrote (also
  after a writer's commit in between), under Iceberg's own reader and eqdelete's;
- the outcome is the one stated in docs/lakehouse.md: committed (with what the client saw),
  nothing committed, or unknown with nothing deleted; for the command line, its exit code and a
  last line saying so.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import pytest
from fixtures import FIXTURES, Fixture
from pyspark.sql import SparkSession

import eqdelete
from eqdelete import _jars
from eqdelete.errors import CommitOutcomeUnknownError, ResolveConflictError, ResolveFailedError
from eqdelete.tools.forwarding_proxy import Exchange, Fault, ForwardingProxy, Message, Rule
from eqdelete.tools.lakehouse import Lakehouse, spark_jars

CATALOG = "faulty"  # the REST catalog and the store, both through the proxies
DIRECT = "lake"  # the same catalog without them: a writer committing beside the run
NAMESPACE = "faults"
_names = itertools.count()


@dataclass
class Proxies:
    catalog: ForwardingProxy
    store: ForwardingProxy

    def clear(self) -> None:
        self.catalog.clear()
        self.store.clear()


def _catalog_options(lakehouse: Lakehouse, proxies: Proxies) -> dict[str, str]:
    options = lakehouse.spark_options(CATALOG)
    prefix = f"spark.sql.catalog.{CATALOG}"
    # Through the proxies; read afresh on every load, as a catalog shared with a writer must be.
    return {**options, f"{prefix}.uri": proxies.catalog.url, f"{prefix}.s3.endpoint": proxies.store.url,
            f"{prefix}.cache-enabled": "false"}


@pytest.fixture(scope="module")
def proxies(spark: SparkSession, lakehouse: Lakehouse, lake: str) -> Iterator[Proxies]:
    with ForwardingProxy(lakehouse.rest_port) as catalog, ForwardingProxy(lakehouse.s3_port) as store:
        found = Proxies(catalog, store)
        for key, value in _catalog_options(lakehouse, found).items():
            spark.conf.set(key, value)
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {CATALOG}.{NAMESPACE}")
        yield found


@pytest.fixture
def faults(proxies: Proxies) -> Iterator[Proxies]:
    proxies.clear()
    yield proxies
    proxies.clear()


@dataclass
class Table:
    name: str  # through the proxies
    direct: str  # the same table, past them
    path: str  # the table's commit endpoint, as the catalog's URL names it
    fixture: Fixture
    version: int
    extra: list[tuple]  # rows a writer added during the run

    @property
    def expected(self) -> list[tuple]:
        return sorted(self.fixture.expected + self.extra)


def make_table(spark: SparkSession, version: int) -> Table:
    short = f"t{os.getpid()}_{next(_names)}"
    name = f"{CATALOG}.{NAMESPACE}.{short}"
    fixture = FIXTURES["mixed_position_and_equality"](spark, name, version=version)
    return Table(name, f"{DIRECT}.{NAMESPACE}.{short}", rf"/namespaces/{NAMESPACE}/tables/{short}$", fixture, version, [])


def current_snapshot(spark: SparkSession, table: str) -> int:
    spark.sql(f"REFRESH TABLE {table}")
    return spark.sql(f"SELECT snapshot_id FROM {table}.refs WHERE name = 'main'").first()[0]


def missing_files(spark: SparkSession, lakehouse: Lakehouse, table: str) -> list[str]:
    """Every file the current snapshot references that is not on the store (asked directly):
    its manifest list, its manifests, and its data and delete files."""
    from pyarrow import fs

    store = lakehouse.s3_filesystem()
    snapshot = current_snapshot(spark, table)
    [manifest_list] = [r[0] for r in spark.sql(f"SELECT manifest_list FROM {table}.snapshots "
                                               f"WHERE snapshot_id = {snapshot}").collect()]
    paths = [manifest_list]
    if store.get_file_info(lakehouse.object_key(manifest_list)).type != fs.FileType.NotFound:
        paths += [r[0] for r in spark.sql(f"SELECT path FROM {table}.manifests").collect()]
        paths += [r[0] for r in spark.sql(f"SELECT file_path FROM {table}.files").collect()]
    return [p for p in paths if store.get_file_info(lakehouse.object_key(p)).type == fs.FileType.NotFound]


def check_table(spark: SparkSession, lakehouse: Lakehouse, table: Table, *, resolved: Optional[bool]) -> None:
    """The table after a fault: every referenced file there, the rows right under Iceberg's reader
    and eqdelete's, no key twice; ``resolved``: whether its equality deletes are gone (None: either)."""
    assert missing_files(spark, lakehouse, table.name) == [], f"{table.name} references missing files"
    for strategy in ("native", "auto"):
        with eqdelete.use_conf(spark, [("spark.eqdelete.strategy", strategy), ("spark.eqdelete.auto.minDataRows", "0")]):
            rows = sorted(tuple(r) for r in spark.table(table.name).collect())
        assert rows == table.expected, f"{table.name} under {strategy}"
        keys = [r[0] for r in rows]
        assert len(keys) == len(set(keys)), f"a key is live twice in {table.name}"
    if resolved is not None:
        left = spark.sql(f"SELECT count(*) FROM {table.name}.delete_files WHERE content = 2").first()[0]
        assert (left == 0) == resolved, f"{left} equality delete file(s) left in {table.name}"


# --- the entry points, in this session ----------------------------------------------------------


@dataclass(frozen=True)
class Ran:
    snapshot_id: Optional[int]
    commit_note: Optional[str]


def _resolve(spark: SparkSession, table: str) -> Ran:
    result = eqdelete.resolve_equality_deletes(spark, table)
    return Ran(result.snapshot_id, result.commit_note)


def _maintain_round(spark: SparkSession, table: str) -> Ran:
    result = eqdelete.maintain_round(spark, table)
    return Ran(result.snapshot_id, result.commit_note)


def _call(procedure: str) -> Callable[[SparkSession, str], Ran]:
    def run(spark: SparkSession, table: str) -> Ran:
        row = spark.sql(f"CALL eqdelete.system.{procedure}(table => '{table}')").first()
        return Ran(row.snapshot_id, row.commit_note)
    return run


ENTRIES: dict[str, Callable[[SparkSession, str], Ran]] = {
    "resolve_equality_deletes": _resolve,
    "maintain_round": _maintain_round,
    "CALL resolve_equality_deletes": _call("resolve_equality_deletes"),
    "CALL maintain": _call("maintain"),
}


def _writer_commit(spark: SparkSession, table: Table) -> Callable[[], None]:
    """A writer's commit between the two sends of the commit, past the proxies."""
    def commit() -> None:
        row = (100 + len(table.extra), f"w{len(table.extra)}")
        spark.sql(f"INSERT INTO {table.direct} VALUES ({row[0]}, '{row[1]}')")
        table.extra.append(row)
    return commit


#: The faults after which the commit landed although the client was told otherwise.
LANDED: dict[str, Callable[[SparkSession, Table], Fault]] = {
    "answer lost": lambda spark, table: Fault.lose_answer(),
    "503 with Retry-After, sent again, 409": lambda spark, table: Fault.replace_answer(503, {"Retry-After": "1"}),
    "sent again by a gateway, 409": lambda spark, table: Fault.send_again(),
    "sent again after a writer's commit, 409": lambda spark, table: Fault.send_again(_writer_commit(spark, table)),
}
_ENTRY_NAMES = list(ENTRIES)
# Each fault on v2 and on v3, through a resolve's entry point on one and a maintain's on the other
# (the entry points rotate, so each meets v2 and v3 once); CI time: the commit under them is one.
LANDED_CASES = [
    (fault, _ENTRY_NAMES[(i + 3 * (version - 2)) % 4], version)
    for i, fault in enumerate(LANDED) for version in (2, 3)
]


@pytest.mark.parametrize(("fault", "entry", "version"), LANDED_CASES)
def test_a_commit_that_landed_is_reported_committed(spark: SparkSession, lakehouse: Lakehouse, faults: Proxies,
                                                    fault: str, entry: str, version: int) -> None:
    table = make_table(spark, version)
    start = current_snapshot(spark, table.name)
    rule = faults.catalog.add(Rule("POST", table.path, LANDED[fault](spark, table)))
    ran = ENTRIES[entry](spark, table.name)
    assert rule.fired == 1
    faults.clear()
    assert ran.snapshot_id is not None and ran.snapshot_id != start
    assert ran.commit_note and "its snapshot was found in the table" in ran.commit_note, ran
    check_table(spark, lakehouse, table, resolved=True)


def test_a_compaction_that_landed_is_reported_committed(spark: SparkSession, lakehouse: Lakehouse,
                                                        faults: Proxies) -> None:
    """The compaction of position delete files (maintain's own, run by a round on v2) through the
    same sequence: its commit (told apart by its marker) sent again, 409."""
    table = make_table(spark, 2)  # two position delete files; the round's resolve adds a third
    rule = faults.catalog.add(Rule("POST", table.path, Fault.send_again(), body="eqdelete.compaction-id"))
    with eqdelete.use_conf(spark, [("spark.eqdelete.maintain.compactPositionDeleteFiles", "2")]):
        round_ = eqdelete.maintain_round(spark, table.name)
    assert rule.fired == 1 and round_.committed
    assert round_.position_delete_files_compacted >= 2 and round_.compaction_files_written >= 1, round_
    assert "the compaction's answer was lost" in (round_.commit_note or ""), round_
    faults.clear()
    check_table(spark, lakehouse, table, resolved=True)
    # Each delete file is its data file's own now, one a data file (threshold 2 keeps one).
    named = spark.sql(f"SELECT delete_file_path, count(DISTINCT file_path) FROM {table.name}.position_deletes GROUP BY 1").collect()
    assert named and all(n == 1 for _, n in named), named
    per_data_file = spark.sql(f"SELECT file_path, count(DISTINCT delete_file_path) FROM {table.name}.position_deletes "
                              "GROUP BY 1").collect()
    assert all(n == 1 for _, n in per_data_file), per_data_file


def test_a_409_before_the_catalog_is_retried_by_iceberg(spark: SparkSession, lakehouse: Lakehouse,
                                                         faults: Proxies) -> None:
    table = make_table(spark, 3)
    rule = faults.catalog.add(Rule("POST", table.path, Fault.refuse(409)))
    result = eqdelete.resolve_equality_deletes(spark, table.name)
    assert rule.fired == 1 and result.committed and result.commit_note is None
    faults.clear()
    check_table(spark, lakehouse, table, resolved=True)


def test_a_commit_losing_every_race_to_a_writer_is_sent_again_not_redone(spark: SparkSession, lakehouse: Lakehouse,
                                                                       faults: Proxies) -> None:
    """A writer's commit lands between each of Iceberg's tries and the catalog's check, until
    Iceberg's retries run out: the round sends the same files again on the new head (its change
    still holds), rather than redoing the resolve, and commits in its first attempt. On v3, whose
    deletion vectors the commit replaces: the re-sent commit still validates them."""
    table = make_table(spark, 3)
    spark.sql(f"ALTER TABLE {table.direct} SET TBLPROPERTIES ('commit.retry.num-retries'='1')")  # two tries
    writer = _writer_commit(spark, table)
    rule = faults.catalog.add(Rule("POST", table.path, Fault.before(lambda _request: writer()), times=3))
    round_ = eqdelete.maintain_round(spark, table.name)
    assert rule.fired == 3 and len(table.extra) == 3
    assert round_.committed and (round_.attempts, round_.conflicts) == (1, 0), round_
    faults.clear()
    check_table(spark, lakehouse, table, resolved=True)


def test_a_commit_refused_every_time_commits_nothing_and_deletes_what_it_wrote(
        spark: SparkSession, lakehouse: Lakehouse, faults: Proxies) -> None:
    from pyarrow import fs

    table = make_table(spark, 2)
    start = current_snapshot(spark, table.name)
    faults.catalog.add(Rule("POST", table.path, Fault.refuse(409), times=None))
    before = len(faults.store.seen)
    settings = [("spark.eqdelete.maintain.maxAttempts", "2"), ("spark.eqdelete.maintain.retryWaitMillis", "100")]
    with eqdelete.use_conf(spark, settings):
        round_ = eqdelete.maintain_round(spark, table.name)
    assert round_.gave_up and not round_.committed and round_.attempts == 2
    assert "409" in (round_.last_conflict or ""), round_.last_conflict
    faults.clear()
    assert current_snapshot(spark, table.name) == start
    check_table(spark, lakehouse, table, resolved=False)
    # The position delete files each attempt wrote were deleted: no commit can reference them.
    written = [s.path.lstrip("/") for s in faults.store.seen[before:] if s.method == "PUT" and "/data/" in s.path]
    store = lakehouse.s3_filesystem()
    assert written and all(store.get_file_info(key).type == fs.FileType.NotFound for key in written), written


def test_an_unknown_outcome_deletes_nothing_and_says_so_in_one_line(spark: SparkSession, lakehouse: Lakehouse,
                                                                     faults: Proxies) -> None:
    table = make_table(spark, 3)
    start = current_snapshot(spark, table.name)
    # Every commit answered 503 without Retry-After: Iceberg cannot tell whether it committed.
    faults.catalog.add(Rule("POST", table.path, Fault.refuse(503, "ServiceUnavailableException"), times=None))
    with pytest.raises(CommitOutcomeUnknownError) as error:
        eqdelete.maintain_round(spark, table.name)
    message = str(error.value)
    assert "\n" not in message and "has an unknown outcome" in message and "Nothing was deleted" in message
    faults.clear()
    assert current_snapshot(spark, table.name) == start
    check_table(spark, lakehouse, table, resolved=False)
    # Run again, it settles it.
    assert eqdelete.resolve_equality_deletes(spark, table.name).committed
    check_table(spark, lakehouse, table, resolved=True)


def test_maintain_goes_on_after_an_unknown_outcome(spark: SparkSession, lakehouse: Lakehouse, faults: Proxies) -> None:
    """The loop reports a round whose outcome is unknown and goes on; the next round settles it."""
    table = make_table(spark, 2)
    faults.catalog.add(Rule("POST", table.path, Fault.refuse(503, "ServiceUnavailableException")))
    unknown: list[CommitOutcomeUnknownError] = []
    summary = eqdelete.maintain(spark, table.name, interval=0, rounds=2, on_unknown=unknown.append)
    assert len(unknown) == 1 and "has an unknown outcome" in str(unknown[0])
    assert (summary.rounds, summary.rounds_committed, summary.unknown_outcomes) == (2, 1, 1)
    assert "1 round(s) whose commit's outcome is unknown" in summary.render()
    faults.clear()
    check_table(spark, lakehouse, table, resolved=True)


@pytest.mark.parametrize("where", ["data", "metadata"])
def test_store_put_failures_commit_nothing(spark: SparkSession, lakehouse: Lakehouse, faults: Proxies,
                                           where: str) -> None:
    """PUTs of the position deletes (the write tasks) or of the commit's manifests (the driver) fail."""
    table = make_table(spark, 2)
    start = current_snapshot(spark, table.name)
    short = table.name.rsplit(".", 1)[1]
    rule = faults.store.add(Rule("PUT", rf"/{NAMESPACE}/{short}/{where}/", Fault.refuse(503, "SlowDown"), times=None))
    with pytest.raises(ResolveFailedError) as error:
        eqdelete.resolve_equality_deletes(spark, table.name)
    assert rule.fired >= 1
    message = str(error.value)
    assert "\n" not in message and "Nothing was committed" in message, message
    faults.clear()
    assert current_snapshot(spark, table.name) == start
    check_table(spark, lakehouse, table, resolved=False)


@pytest.mark.parametrize("times", [1, None], ids=["transient", "permanent"])
def test_store_get_failures_of_a_delete_file(spark: SparkSession, lakehouse: Lakehouse, faults: Proxies,
                                             times: Optional[int]) -> None:
    table = make_table(spark, 3)
    start = current_snapshot(spark, table.name)
    [path] = [r[0] for r in spark.sql(f"SELECT file_path FROM {table.name}.delete_files WHERE content = 2").collect()]
    rule = faults.store.add(Rule("GET", "/" + lakehouse.object_key(path), Fault.refuse(503, "SlowDown"), times=times))
    if times is None:
        with pytest.raises(ResolveFailedError) as error:
            eqdelete.resolve_equality_deletes(spark, table.name)
        assert rule.fired >= 1
        assert "\n" not in str(error.value) and f"cannot read equality delete file {path}" in str(error.value)
        faults.clear()
        assert current_snapshot(spark, table.name) == start
        check_table(spark, lakehouse, table, resolved=False)
    else:
        assert eqdelete.resolve_equality_deletes(spark, table.name).committed  # the SDK's own retry
        assert rule.fired == 1
        faults.clear()
        check_table(spark, lakehouse, table, resolved=True)


# --- the command line, in a process of its own -------------------------------------------------


def _command(lakehouse: Lakehouse, proxies: Proxies, spark: SparkSession, *args: str) -> list[str]:
    # The Iceberg release of this session (its runtime from build/deps, and its AWS bundle).
    release = spark.sql("SELECT eqdelete_version()").first()[0].split("Iceberg ")[1].rstrip(")")
    line = _jars.supported_line()
    runtime = [j for j in _jars.session_jars({}, line, release, sqlite=False).jars if "iceberg-spark-runtime" in j]
    jars = [*runtime, *spark_jars(release)]
    conf = {**_catalog_options(lakehouse, proxies), "spark.jars": ",".join(jars),
            "spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"}
    command = [sys.executable, "-m", "eqdelete", *args, "--master", "local[1]", "--driver-memory", "1g",
               "--progress-seconds", "600"]
    for key, value in conf.items():
        command += ["--conf", f"{key}={value}"]
    return command


def _last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


# The command line's report of a landed commit, for each command once (a JVM each: CI time); every
# fault of LANDED goes through both entries in process above.
CLI_CASES = [
    ("resolve", 3, "sent again after a writer's commit, 409"),
    ("maintain --once", 2, "sent again by a gateway, 409"),
]


@pytest.mark.command_line
@pytest.mark.parametrize(("command", "version", "fault"), CLI_CASES)
def test_the_command_line_reports_a_landed_commit(spark: SparkSession, lakehouse: Lakehouse, faults: Proxies,
                                                  tmp_path: Path, command: str, version: int, fault: str) -> None:
    table = make_table(spark, version)
    faults.catalog.add(Rule("POST", table.path, LANDED[fault](spark, table)))
    done = subprocess.run(_command(lakehouse, faults, spark, *command.split(), "--table", table.name),
                          capture_output=True, text=True, cwd=tmp_path, timeout=600)
    faults.clear()
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr and "Py4JJavaError" not in done.stderr
    if command == "resolve":
        said = done.stdout.splitlines()[0]
        assert f"resolved {table.name}: snapshot" in said and "committed, nothing to do" in said
    else:  # a JSON line per round on stdout; on stderr the round in one line
        said = json.loads(_last_line(done.stdout))["commit_note"]
        assert any(said in line and line.startswith("[eqdelete maintain] round 1:") for line in done.stderr.splitlines())
    assert "its snapshot was found in the table" in said, said
    check_table(spark, lakehouse, table, resolved=True)


@pytest.mark.command_line
def test_the_command_line_reports_an_unknown_outcome(spark: SparkSession, lakehouse: Lakehouse, faults: Proxies,
                                                     tmp_path: Path) -> None:
    table = make_table(spark, 2)
    start = current_snapshot(spark, table.name)
    faults.catalog.add(Rule("POST", table.path, Fault.refuse(503, "ServiceUnavailableException"), times=None))
    done = subprocess.run(_command(lakehouse, faults, spark, "resolve", "--table", table.name),
                          capture_output=True, text=True, cwd=tmp_path, timeout=600)
    faults.clear()
    assert done.returncode == 5, done.stderr[-3000:]
    last = _last_line(done.stderr)
    assert last.startswith("eqdelete: the commit resolving the equality deletes of") and "unknown outcome" in last
    assert "Nothing was deleted" in last and "run it again" in last and "Traceback" not in done.stderr
    assert current_snapshot(spark, table.name) == start
    check_table(spark, lakehouse, table, resolved=False)


@pytest.mark.command_line
@pytest.mark.parametrize("when", ["before the catalog", "after the catalog committed"])
def test_kill_9_around_the_commit(spark: SparkSession, lakehouse: Lakehouse, faults: Proxies, tmp_path: Path,
                                  when: str) -> None:
    """``maintain`` killed with SIGKILL (its JVM too) as its commit reaches the catalog, or just after
    the catalog committed it: the table stays whole, and the next run finishes the work."""
    table = make_table(spark, 3 if when.startswith("after") else 2)
    start = current_snapshot(spark, table.name)
    process: list[subprocess.Popen] = []
    killed = threading.Event()

    def kill(_: Any) -> None:
        os.killpg(process[0].pid, signal.SIGKILL)
        killed.set()

    fault = Fault.before(kill, then=Fault.drop()) if when.startswith("before") else Fault.after(kill)
    faults.catalog.add(Rule("POST", table.path, fault))
    with open(tmp_path / "err", "wb") as err:
        process.append(subprocess.Popen(_command(lakehouse, faults, spark, "maintain", "--once", "--table", table.name),
                                        stdout=subprocess.DEVNULL, stderr=err, cwd=tmp_path, start_new_session=True))
        code = process[0].wait(timeout=600)
    # The proxy's thread sets the event just after its kill: this thread may see the process gone first.
    assert killed.wait(timeout=30) and code == -signal.SIGKILL, (tmp_path / "err").read_text()[-3000:]
    faults.clear()
    landed = current_snapshot(spark, table.name) != start
    assert landed == when.startswith("after")
    check_table(spark, lakehouse, table, resolved=landed)
    again = eqdelete.resolve_equality_deletes(spark, table.name)
    assert again.committed != landed  # what is left, if anything
    check_table(spark, lakehouse, table, resolved=True)


# --- maintain stopped by SIGTERM (a platform's stop: Kubernetes, systemd) ---------------------------

#: The bound docs/lakehouse.md gives: from SIGTERM to the process's exit.
STOP_SECONDS = 30


@pytest.fixture(scope="module")
def held_tasks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The jar of tests/lakehouse/HeldTasks.java (a Spark plugin holding maintain's tasks), compiled
    against this line's Spark."""
    import pyspark

    out = tmp_path_factory.mktemp("held-tasks")
    jars = Path(pyspark.__file__).parent / "jars"
    subprocess.run(["javac", "-d", str(out), "-cp", f"{jars}/*", str(Path(__file__).parent / "HeldTasks.java")],
                   check=True, timeout=120)
    classes = [arg for c in sorted(out.glob("HeldTasks*.class")) for arg in ("-C", str(out), c.name)]
    subprocess.run(["jar", "cf", str(out / "held-tasks.jar"), *classes], check=True, timeout=60)
    return out / "held-tasks.jar"


def _stopped(process: subprocess.Popen, signalled: float) -> float:
    """Seconds from the signal to the process's exit (the test's bound on it plus a margin to wait)."""
    process.wait(timeout=STOP_SECONDS + 60)
    return time.monotonic() - signalled


def _rounds_of(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.read_text().splitlines() if line.startswith("{")]


def _terminated_while_held(command: list[str], hold: Path, tmp_path: Path, what: str, settle: float = 0,
                           when_held: Callable[[], None] = lambda: None) -> list[dict[str, Any]]:
    """Runs ``command`` until a task is held (HeldTasks, while ``hold`` exists), waits ``settle``
    seconds more, calls ``when_held``, sends SIGTERM; asserts the process exits 0 within the bound
    (the time printed); the rounds it reported."""
    out, err = tmp_path / "out", tmp_path / "err"
    with open(out, "wb") as stdout, open(err, "wb") as stderr:
        process = subprocess.Popen(command, stdout=stdout, stderr=stderr, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 300
        while not (tmp_path / "hold.held").exists():
            assert process.poll() is None and time.monotonic() < deadline, err.read_text()[-3000:]
            time.sleep(0.2)
        time.sleep(settle)
        when_held()
        signalled = time.monotonic()
        process.send_signal(signal.SIGTERM)
        seconds = _stopped(process, signalled)
    finally:
        hold.unlink(missing_ok=True)
        if process.poll() is None:
            process.kill()
    print(f"\n[stop] {what}: SIGTERM to exit {seconds:.1f} s")
    assert process.returncode == 0, err.read_text()[-3000:]
    assert seconds <= STOP_SECONDS, f"{seconds:.1f} s from SIGTERM to exit"
    return _rounds_of(out)


@pytest.mark.command_line
@pytest.mark.parametrize("how", ["--table, building the kept index", "--tables, two rounds at once"])
def test_sigterm_during_a_held_stage_stops_within_the_bound(spark: SparkSession, lakehouse: Lakehouse, faults: Proxies,
                                                            held_tasks: Path, tmp_path: Path, how: str) -> None:
    """SIGTERM while a round's stage is held (every task of maintain's jobs waits, HeldTasks): the
    rounds stop at once, their jobs cancelled, nothing committed; the process exits 0 within the
    bound; the next round finishes the work on a whole table."""
    tables = [make_table(spark, 3)] + ([make_table(spark, 2)] if how.startswith("--tables") else [])
    starts = [current_snapshot(spark, t.name) for t in tables]
    hold = tmp_path / "hold"
    hold.touch()
    which = ["--table", tables[0].name] if how.startswith("--table,") else ["--tables", ", ".join(t.name for t in tables)]
    command = [*_command(lakehouse, faults, spark, "maintain", *which, "--interval", "1"), "--conf", "spark.plugins=HeldTasks",
               "--conf", f"spark.heldTasks.while={hold}", "--conf", "spark.eqdelete.maintain.liveIndex=always"]
    command = [f"{c},{held_tasks}" if c.startswith("spark.jars=") else c for c in command]
    # Both rounds held before the signal (two slots, a round each).
    rounds = _terminated_while_held(command, hold, tmp_path, f"{how}", settle=2 if len(tables) > 1 else 0)
    assert sorted(r["table"].rsplit(".", 1)[-1] for r in rounds) == sorted(t.name.rsplit(".", 1)[-1] for t in tables), rounds
    for r in rounds:
        assert r["snapshot_id"] is None and r["stopped_at"].startswith("resolve: finding the rows"), r
    if how.startswith("--table,"):
        assert "through the kept index" in rounds[0]["stopped_at"], rounds
    for table, start in zip(tables, starts):
        assert current_snapshot(spark, table.name) == start
        check_table(spark, lakehouse, table, resolved=False)
        assert eqdelete.maintain_round(spark, table.name).committed  # the next round finishes the work
        check_table(spark, lakehouse, table, resolved=True)


@pytest.mark.command_line
@pytest.mark.parametrize("how", ["--table", "--tables"])
def test_sigterm_during_data_compaction_stops_within_the_bound(spark: SparkSession, lakehouse: Lakehouse, faults: Proxies,
                                                               held_tasks: Path, tmp_path: Path, how: str) -> None:
    """SIGTERM while Iceberg's data file rewrite, which a round's data compaction runs under a job
    group of Iceberg's own, is held in its stage: its jobs are cancelled all the same (by the round's
    job tag), the rewrite is abandoned before its commit, the process exits 0 within the bound, the
    resolve before it stands, no file of the rewrite is left, and the next round compacts."""
    table = make_table(spark, 3)
    start = current_snapshot(spark, table.name)
    hold = tmp_path / "hold"
    hold.touch()
    compaction = ["--conf", "spark.eqdelete.maintain.compactDataBytesPerHour=1073741824",
                  "--conf", "spark.eqdelete.maintain.compactDataDeadRatio=0.01"]
    command = [*_command(lakehouse, faults, spark, "maintain", how, table.name, "--interval", "1"), *compaction,
               "--conf", "spark.plugins=HeldTasks", "--conf", f"spark.heldTasks.while={hold}",
               "--conf", "spark.heldTasks.groups=REWRITE-DATA-FILES"]
    command = [f"{c},{held_tasks}" if c.startswith("spark.jars=") else c for c in command]
    [round_] = _terminated_while_held(command, hold, tmp_path, f"{how}, during data compaction")
    assert round_["stopped_at"] == "compacting the data files past the dead-row share", round_
    assert round_["snapshot_id"] is not None and round_["data_files_compacted"] == 0, round_
    # The resolve's commit stands; the rewrite committed nothing and left no file behind.
    assert current_snapshot(spark, table.name) == round_["snapshot_id"] != start
    check_table(spark, lakehouse, table, resolved=True)
    assert _unreferenced_data_files(spark, lakehouse, table.name) == []
    with eqdelete.use_conf(spark, [("spark.eqdelete.maintain.compactDataBytesPerHour", "1073741824"),
                                   ("spark.eqdelete.maintain.compactDataDeadRatio", "0.01")]):
        assert eqdelete.maintain_round(spark, table.name).data_files_compacted > 0  # the next round compacts
    check_table(spark, lakehouse, table, resolved=True)


def _spread_table(spark: SparkSession, version: int) -> Table:
    """A table whose equality deletes touch eight more data files: its resolve's write stage has
    several tasks with files to write."""
    table = make_table(spark, version)
    for i in range(8):
        spark.createDataFrame([(100 + 2 * i, "w"), (101 + 2 * i, "w")], "k BIGINT, v STRING").coalesce(1) \
            .writeTo(table.direct).append()
    eqdelete.write_equality_deletes(spark, table.direct, ["k"], [(100 + 2 * i,) for i in range(8)])
    table.extra.extend((101 + 2 * i, "w") for i in range(8))
    return table


#: What the write stage of a resolve is called in Spark's UI (its call site): TaskWrittenFiles runs its job.
WRITE_STAGE = "TaskWrittenFiles.scala"


@pytest.mark.command_line
@pytest.mark.parametrize(("how", "version"), [("--table", 2), ("--tables", 3)])
def test_a_stopped_write_leaves_no_file_behind(spark: SparkSession, lakehouse: Lakehouse, faults: Proxies,
                                               held_tasks: Path, tmp_path: Path, how: str, version: int) -> None:
    """The resolve's write stage with its other tasks finished (their position delete files or
    deletion vectors written, their results on the driver) and its last task held: SIGTERM stops
    the round, the job is cancelled, and the files of the finished tasks, which no commit will
    name, are deleted. No file in the table's location that no snapshot references; the next round
    finishes the work."""
    tables = [_spread_table(spark, version)] + ([_spread_table(spark, 2)] if how == "--tables" else [])
    starts = [current_snapshot(spark, t.name) for t in tables]
    hold = tmp_path / "hold"
    hold.touch()
    which = ["--table", tables[0].name] if how == "--table" else ["--tables", ", ".join(t.name for t in tables)]
    command = [*_command(lakehouse, faults, spark, "maintain", *which, "--interval", "1"),
               "--conf", "spark.plugins=HeldTasks", "--conf", f"spark.heldTasks.while={hold}",
               "--conf", f"spark.heldTasks.callSite={WRITE_STAGE}", "--conf", "spark.sql.shuffle.partitions=4",
               "--conf", "spark.sql.adaptive.coalescePartitions.enabled=false"]
    command = [f"{c},{held_tasks}" if c.startswith("spark.jars=") else c for c in command]
    written: list[str] = []

    def finished_tasks_wrote() -> None:
        written.extend(f for t in tables for f in _unreferenced_data_files(spark, lakehouse, t.name))
    rounds = _terminated_while_held(command, hold, tmp_path, f"{how}, v{version}, the write stage's last task held",
                                    settle=2 if how == "--tables" else 0, when_held=finished_tasks_wrote)
    assert written, "no finished task of the write stage had written a file when it was stopped"
    # The other table's round may not have reached a step yet (one slot): it stopped with nothing begun.
    assert any((r["stopped_at"] or "").startswith("resolve: finding the rows") for r in rounds), rounds
    assert all(r["snapshot_id"] is None for r in rounds if r["stopped_at"]), rounds
    for table, start in zip(tables, starts):
        assert _unreferenced_data_files(spark, lakehouse, table.name) == []
        if any(r["table"] == table.name and r["snapshot_id"] is not None for r in rounds):
            # With --tables, a round may end before its write stage is held (two rounds at once; the
            # listener that marks a stage to hold may hear of it after its last task started): it
            # committed whole, and the stopped round is the other's.
            assert how == "--tables", rounds
            check_table(spark, lakehouse, table, resolved=True)
            continue
        assert current_snapshot(spark, table.name) == start
        check_table(spark, lakehouse, table, resolved=False)
        assert eqdelete.maintain_round(spark, table.name).committed  # the next round finishes the work
        check_table(spark, lakehouse, table, resolved=True)


@pytest.mark.parametrize("version", [2, 3])
def test_a_failed_write_leaves_no_file_behind(spark: SparkSession, lakehouse: Lakehouse, faults: Proxies,
                                              version: int) -> None:
    """The store takes the write stage's first file and refuses every later one (403): the job
    fails with a task's file stored, which is deleted, as are the failing tasks' own. The resolve
    fails in one line, nothing committed, no file left that no snapshot references.

    The first file to arrive is stored whichever task wrote it: the files are spread over the
    tasks by their data file's path, random, so refusing given tasks' files could refuse them all."""
    table = _spread_table(spark, version)
    start = current_snapshot(spark, table.name)
    data = rf"/{NAMESPACE}/{table.name.rsplit('.', 1)[1]}/data/"
    arrived = itertools.count()  # next() is atomic under the GIL: exactly one request is the first
    stored: list[str] = []

    def first_stored_then_refused(exchange: Exchange) -> Message:
        if next(arrived) > 0:
            return Fault.refuse(403, "AccessDenied").act(exchange)
        answer = exchange.forward()
        if answer.status == 200:
            stored.append(exchange.request.path)
        return answer

    rule = faults.store.add(Rule("PUT", data, Fault("the first file stored, later ones refused", first_stored_then_refused),
                                 times=None))
    with eqdelete.use_conf(spark, [("spark.sql.shuffle.partitions", "4"),
                                   ("spark.sql.adaptive.coalescePartitions.enabled", "false")]):
        with pytest.raises(ResolveFailedError) as error:
            eqdelete.resolve_equality_deletes(spark, table.name)
    faults.clear()
    assert rule.fired >= 2 and len(stored) == 1, (rule.fired, stored)  # a task stored its file, the others failed
    assert "\n" not in str(error.value) and "Nothing was committed" in str(error.value), str(error.value)
    assert current_snapshot(spark, table.name) == start
    assert _unreferenced_data_files(spark, lakehouse, table.name) == []
    check_table(spark, lakehouse, table, resolved=False)


def _unreferenced_data_files(spark: SparkSession, lakehouse: Lakehouse, table: str) -> list[str]:
    """Objects under the table's data directory that no snapshot references (a rewrite's leftovers)."""
    from pyarrow import fs

    location = spark.sql(f"DESCRIBE TABLE EXTENDED {table}").filter("col_name = 'Location'").first().data_type
    found = lakehouse.s3_filesystem().get_file_info(fs.FileSelector(lakehouse.object_key(f"{location}/data"), recursive=True))
    referenced = {lakehouse.object_key(r[0]) for r in spark.sql(f"SELECT file_path FROM {table}.all_files").collect()}
    return [f.path for f in found if f.type == fs.FileType.File and f.path not in referenced]


@pytest.mark.command_line
def test_sigterm_during_the_commit_lets_it_land(spark: SparkSession, lakehouse: Lakehouse, faults: Proxies,
                                                tmp_path: Path) -> None:
    """SIGTERM as maintain's commit reaches the catalog, which takes 5 s to answer: the commit is not
    cut, it lands and is settled; the round stops after it; the process exits 0 within the bound."""
    table = make_table(spark, 2)
    start = current_snapshot(spark, table.name)
    process: list[subprocess.Popen] = []
    signalled: list[float] = []

    def terminate_then_wait(_: Any) -> None:
        signalled.append(time.monotonic())
        process[0].send_signal(signal.SIGTERM)
        time.sleep(5)

    rule = faults.catalog.add(Rule("POST", table.path, Fault.before(terminate_then_wait)))
    out, err = tmp_path / "out", tmp_path / "err"
    with open(out, "wb") as stdout, open(err, "wb") as stderr:
        process.append(subprocess.Popen(_command(lakehouse, faults, spark, "maintain", "--table", table.name,
                                                 "--interval", "1"), stdout=stdout, stderr=stderr, cwd=tmp_path))
    try:
        deadline = time.monotonic() + 300
        while not signalled:
            assert process[0].poll() is None and time.monotonic() < deadline, err.read_text()[-3000:]
            time.sleep(0.2)
        seconds = _stopped(process[0], signalled[0])
    finally:
        if process[0].poll() is None:
            process[0].kill()
    faults.clear()
    print(f"\n[stop] during the commit: SIGTERM to exit {seconds:.1f} s")
    assert rule.fired == 1 and process[0].returncode == 0, err.read_text()[-3000:]
    assert seconds <= STOP_SECONDS, f"{seconds:.1f} s from SIGTERM to exit"
    [round_] = _rounds_of(out)
    assert round_["snapshot_id"] is not None and round_["stopped_at"] == "compacting the position delete files", round_
    assert current_snapshot(spark, table.name) == round_["snapshot_id"] != start
    check_table(spark, lakehouse, table, resolved=True)


def test_errors_are_one_line_under_the_python_api(spark: SparkSession, faults: Proxies) -> None:
    """Not a Py4JJavaError with a stage failure: eqdelete's own error, its message one line."""
    table = make_table(spark, 2)
    faults.catalog.add(Rule("POST", table.path, Fault.refuse(409), times=None))
    with pytest.raises(ResolveConflictError) as error:
        eqdelete.resolve_equality_deletes(spark, table.name)
    assert "\n" not in str(error.value) and "Nothing was committed" in str(error.value)
