"""Operating a lakehouse: every table's debt shown (``status``, ``eqdelete_status``) and one
service keeping every table of a namespace resolved (``maintain_tables``, ``maintain --tables``)
while writers commit, one table's failure isolated. Real tables on the embedded catalog; rows
compared with what the test wrote."""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import asdict, fields
from pathlib import Path
from typing import Callable

import pytest
from conftest import CATALOG
from pyspark.sql import SparkSession

import eqdelete
from eqdelete import _jvm
from eqdelete.service import ServiceEvent, maintain_tables
from eqdelete.status import TableStatus, render, status

_namespaces = iter(range(1_000_000))


@pytest.fixture
def namespace(spark: SparkSession):
    name = f"{CATALOG}.svc_{os.getpid()}_{next(_namespaces)}"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {name}")
    yield name
    for row in spark.sql(f"SHOW TABLES IN {name}").collect():
        spark.sql(f"DROP TABLE IF EXISTS {name}.{row.tableName}")


def create(spark: SparkSession, table: str, version: int, rows: int = 100, files: int = 2) -> dict[int, str]:
    spark.sql(f"CREATE TABLE {table} (k BIGINT, v STRING) USING iceberg "
              f"TBLPROPERTIES ('format-version'='{version}', 'write.delete.mode'='merge-on-read')")
    per = rows // files
    for f in range(files):
        spark.sql(f"INSERT INTO {table} SELECT id, 'v0' FROM range({f * per}, {(f + 1) * per}, 1, 1)")
    return {k: "v0" for k in range(rows)}


def rows_of(spark: SparkSession, table: str, strategy: str = "native") -> dict[int, str]:
    with eqdelete.use_strategy(spark, strategy):
        return {r.k: r.v for r in spark.table(table).collect()}


#: Rounds through a kept index of the live rows, whatever the table's size, of as many stores in
#: each driver (one built with other stores is built again, not restored).
KEPT = [("spark.eqdelete.maintain.liveIndex", "always"), ("spark.eqdelete.maintain.liveIndexStores", "2")]


def until(check: Callable[[], bool], what: str, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, f"not {what} in {seconds:.0f} s"
        time.sleep(0.5)


def by_table(statuses: list[TableStatus]) -> dict[str, TableStatus]:
    return {s.table.rsplit(".", 1)[-1]: s for s in statuses}


def test_status_shows_each_tables_debt_and_what_maintain_does_next(spark: SparkSession, namespace: str) -> None:
    for name, version in (("v2", 2), ("v3", 3), ("clean", 2)):
        create(spark, f"{namespace}.{name}", version)
    for name in ("v2", "v3"):
        eqdelete.write_equality_deletes(spark, f"{namespace}.{name}", ["k"], [(k,) for k in range(10)])
        eqdelete.write_equality_deletes(spark, f"{namespace}.{name}", ["k"], [(k,) for k in range(10, 15)])

    found = by_table(status(spark, f"{namespace}.*"))
    assert sorted(found) == ["clean", "v2", "v3"]
    for name in ("v2", "v3"):
        s = found[name]
        assert (s.data_files, s.data_rows, s.equality_delete_files, s.equality_delete_rows) == (2, 100, 2, 15), s
        assert s.next == "resolve 2 equality delete file(s), 15 row(s)" and s.error is None and s.maintain_enabled
        # Native: 100 rows read, and the task of the file holding keys 0-49 loads the 15 delete rows
        # (Iceberg's planning pairs the other file with neither delete file: their key bounds do not meet).
        assert s.native_over_floor == pytest.approx((100 + 15) / 100)
        assert s.lag_seconds >= 0 and s.position_delete_files == 0 and s.dead_row_ratio == 0
    assert (found["clean"].equality_delete_files, found["clean"].native_over_floor, found["clean"].next) == (0, 1.0, "nothing")

    # The SQL table function has the same rows (the lag aside: it grows between the two calls).
    tvf = {r["table"]: r for r in (row.asDict() for row in spark.sql(f"SELECT * FROM eqdelete_status('{namespace}')").collect())}
    assert list(tvf[found["v2"].table]) == [f.name for f in fields(TableStatus)]
    for s in found.values():
        assert {**tvf[s.table], "lag_seconds": 0} == {**asdict(s), "lag_seconds": 0}

    # Resolved, the debt becomes position deletes: one file per data file a v2 reader opens, 15% dead rows.
    eqdelete.maintain_round(spark, f"{namespace}.v2")
    after = by_table(status(spark, f"{namespace}.v2"))["v2"]
    assert (after.equality_delete_files, after.position_delete_files_per_data_file, after.next) == (0, 1, "nothing")
    assert after.position_deleted_rows == 15 and after.dead_row_ratio == pytest.approx(0.15)
    assert after.native_over_floor == pytest.approx(100 / 85)

    # Table properties: a round waits for enough files; a disabled table is let be by the service.
    v3 = f"{namespace}.v3"
    spark.sql(f"ALTER TABLE {v3} SET TBLPROPERTIES ('eqdelete.maintain.min-equality-delete-files'='3', "
              "'eqdelete.maintain.interval-seconds'='300')")
    s = by_table(status(spark, v3))["v3"]
    assert s.next == "nothing (2 equality delete file(s) live < eqdelete.maintain.min-equality-delete-files=3)"
    assert s.interval_seconds == 300
    deferred = eqdelete.maintain_round(spark, v3)
    assert (deferred.committed, deferred.equality_delete_files_live) == (False, 2)
    assert deferred.render().startswith(f"{deferred.table}: resolve deferred: 2 equality delete file(s) live <")
    spark.sql(f"ALTER TABLE {v3} SET TBLPROPERTIES ('eqdelete.maintain.min-equality-delete-files'='2', "
              "'eqdelete.maintain.enabled'='false')")
    s = by_table(status(spark, v3))["v3"]
    assert not s.maintain_enabled and s.next.startswith("nothing under maintain --tables (eqdelete.maintain.enabled=false)")
    assert eqdelete.maintain_round(spark, v3).rows_resolved == 15       # by name it runs all the same
    assert rows_of(spark, v3) == {k: "v0" for k in range(15, 100)}

    # What cannot be looked at gets a row saying why; a glob matching nothing, no row.
    spark.sql(f"ALTER TABLE {namespace}.clean SET TBLPROPERTIES ('eqdelete.maintain.min-equality-delete-files'='none')")
    broken = status(spark, f"{namespace}.clean, {namespace}.missing, {namespace}.zz*")
    assert [(s.table.rsplit(".", 1)[-1], s.error is not None) for s in broken] == [("clean", True), ("missing", True)]
    assert broken[0].error == (f"eqdelete: invalid value 'none' for table property eqdelete.maintain.min-equality-delete-files "
                               f"of {broken[0].table}: must be a whole number of at least 1")
    assert "missing" in broken[1].error
    assert render(broken).splitlines()[2].split()[-1] != "nothing"


class Writer(threading.Thread):
    """Upserts and deletes rows of the tables, a commit at a time, keeping what each should hold."""

    def __init__(self, spark: SparkSession, tables: dict[str, dict[int, str]], commits: int, seed: int) -> None:
        super().__init__(daemon=True)
        self.spark, self.tables, self.commits, self.random = spark, tables, commits, random.Random(seed)
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            for commit in range(self.commits):
                table = self.random.choice(sorted(self.tables))
                model = self.tables[table]
                upserted = self.random.sample(range(120), 8)       # some beyond the first rows: inserts
                deleted = [k for k in self.random.sample(range(120), 3) if k not in upserted]
                eqdelete.write_equality_deletes(self.spark, table, ["k"], [(k,) for k in upserted + deleted],
                                                inserts=[(k, f"c{commit}") for k in upserted])
                for k in deleted:
                    model.pop(k, None)
                model.update({k: f"c{commit}" for k in upserted})
                time.sleep(0.2)
        except BaseException as error:  # noqa: BLE001 - reported by the test
            self.error = error


def test_one_service_keeps_every_table_resolved_and_isolates_a_failing_one(spark: SparkSession, namespace: str) -> None:
    models = {f"{namespace}.t{i}": create(spark, f"{namespace}.t{i}", 2 + i % 2, rows=100) for i in range(5)}
    # A table whose equality delete file is lost: every round on it fails, the others go on.
    lost = f"{namespace}.lost"
    create(spark, lost, 2)
    eqdelete.write_equality_deletes(spark, lost, ["k"], [(1,)])
    [path] = [r[0] for r in spark.sql(f"SELECT file_path FROM {lost}.delete_files").collect()]
    os.remove(path.removeprefix("file:"))
    dropped = f"{namespace}.dropped"
    create(spark, dropped, 2)

    events: list[ServiceEvent] = []
    stop = threading.Event()
    outcome: dict = {}
    service = threading.Thread(target=lambda: outcome.update(summary=maintain_tables(
        spark, namespace, interval=1, concurrency=2, rescan=1, max_backoff=4, stop=stop, on_event=events.append)))
    service.start()
    try:
        writer = Writer(spark, models, commits=25, seed=45)
        writer.start()
        time.sleep(3)
        spark.sql(f"DROP TABLE {dropped}")                              # let go
        created = f"{namespace}.created"                                # picked up
        models[created] = create(spark, created, 3)
        eqdelete.write_equality_deletes(spark, created, ["k"], [(k,) for k in range(5)])
        for k in range(5):
            models[created].pop(k)
        writer.join(timeout=240)
        assert writer.error is None and not writer.is_alive(), writer.error
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            pending = [s for s in status(spark, namespace) if s.table in models and s.equality_delete_files]
            if not pending:
                break
            time.sleep(1)
        assert not pending, render(pending)
    finally:
        stop.set()
        service.join(timeout=120)
    summary = outcome["summary"]
    print(summary.render())
    tables = summary.tables
    for table, model in models.items():
        assert tables[table].failures == 0 and tables[table].rounds_committed >= 1, tables[table]
        assert rows_of(spark, table) == model, table
        assert rows_of(spark, table, "auto") == model, table
    assert sum(tables[t].rows_resolved for t in models) > 0
    failing = tables[lost]
    assert failing.failures >= 2 and failing.rounds_committed == 0 and "cannot read equality delete file" in failing.last_error
    assert [e.kind for e in events if e.table == lost and e.kind == "failed"] == ["failed"] * failing.failures
    assert tables[dropped].let_go == "no longer listed (dropped or renamed)"
    assert any(e.table == created and e.kind == "picked up" for e in events)
    assert summary.longest_wait_seconds < 30, summary.render()


class Lines(threading.Thread):
    """A process's stream read line by line as it comes (drained, so no full pipe ever blocks it)."""

    def __init__(self, stream) -> None:  # noqa: ANN001
        super().__init__(daemon=True)
        self.stream, self.lines = stream, []
        self.start()

    def run(self) -> None:
        for line in self.stream:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, found: Callable[[str], bool], after: int = 0, seconds: float = 180) -> int:
        """The index of the first line from ``after`` on that ``found`` accepts, waiting for it."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for i in range(after, len(self.lines)):
                if found(self.lines[i]):
                    return i
            if not self.is_alive():
                break
            time.sleep(0.2)
        raise AssertionError(f"no such line in {seconds:.0f} s; the last: {self.lines[-30:]}")


def test_the_command_line_shows_status_and_serves_a_namespace(spark: SparkSession, warehouse: Path, tmp_path: Path) -> None:
    namespace = f"{CATALOG}.svc_cli_{os.getpid()}"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {namespace}")
    a, b, lost = f"{namespace}.a", f"{namespace}.b", f"{namespace}.lost"
    models = {a: create(spark, a, 2), b: create(spark, b, 3)}
    for table in models:
        eqdelete.write_equality_deletes(spark, table, ["k"], [(k,) for k in range(7)])
    common = ["--warehouse", str(warehouse), "--master", "local[1]", "--driver-memory", "1g", "--conf", "spark.ui.enabled=false",
              *[arg for setting in KEPT for arg in ("--conf", "=".join(setting))]]
    shown = subprocess.run([sys.executable, "-m", "eqdelete", "status", "--tables", f"{namespace}.*", "--json", *common],
                           cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert shown.returncode == 0, shown.stderr[-3000:]
    rows = json.loads(shown.stdout)
    assert [(r["table"].rsplit(".", 1)[-1], r["equality_delete_files"], r["next"]) for r in rows] == [
        ("a", 1, "resolve 1 equality delete file(s), 7 row(s)"), ("b", 1, "resolve 1 equality delete file(s), 7 row(s)")]
    # A table whose equality delete file is lost: each of its rounds fails, in one line.
    create(spark, lost, 2)
    eqdelete.write_equality_deletes(spark, lost, ["k"], [(1,)])
    [path] = [r[0] for r in spark.sql(f"SELECT file_path FROM {lost}.delete_files").collect()]
    os.remove(path.removeprefix("file:"))

    service = subprocess.Popen([sys.executable, "-m", "eqdelete", "maintain", "--tables", namespace, "--interval", "1",
                                *common], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = Lines(service.stdout), Lines(service.stderr)

    def resolved(table: str, rows: int) -> Callable[[str], bool]:
        return lambda line: json.loads(line)["table"] == table and json.loads(line)["rows_resolved"] == rows

    try:
        for table in models:
            out.wait_for(resolved(f"{table}", 7))
        # A bad table property set while the service runs fails the table's next round (none
        # resolves its new deletes); fixed, the round after the fix resolves them.
        interval = "eqdelete.maintain.interval-seconds"
        spark.sql(f"ALTER TABLE {a} SET TBLPROPERTIES ('{interval}'='abc')")
        mark = len(out.lines)
        eqdelete.write_equality_deletes(spark, a, ["k"], [(7,), (8,)])
        err.wait_for(lambda line: f"] {a}: failed: " in line and "invalid value 'abc'" in line)
        assert not any(json.loads(line)["table"] == a and json.loads(line)["rows_resolved"] for line in out.lines[mark:])
        spark.sql(f"ALTER TABLE {a} SET TBLPROPERTIES ('{interval}'='1')")
        out.wait_for(resolved(a, 2), after=mark)
        # Two drivers keep a's index at once: this session's beside the service's, each committing
        # rounds and bringing its index forward over the other's commits.
        with eqdelete.use_conf(spark, KEPT):
            # Until this session's rounds committed twice: the service's rounds may take the deletes first.
            committed, i = 0, 0
            while committed < 2:
                assert i < 12, "this session's rounds never found deletes the service had not resolved"
                eqdelete.write_equality_deletes(spark, a, ["k"], [(k,) for k in range(20 + 3 * i, 23 + 3 * i)])
                mine = eqdelete.maintain_round(spark, a, keep_index=True)
                note = mine.live_index_note or ""
                assert note == "" or "built from the table" in note or "restored from version" in note, mine.render()
                assert "built again" not in note, mine.render()
                committed += mine.committed
                i += 1
        until(lambda: [s.equality_delete_files for s in status(spark, a)] == [0], "a's deletes resolved")
        # enabled=false: the service lets the table be from its next round on.
        spark.sql(f"ALTER TABLE {b} SET TBLPROPERTIES ('eqdelete.maintain.enabled'='false')")
        mark = len(out.lines)
        eqdelete.write_equality_deletes(spark, b, ["k"], [(7,)])
        err.wait_for(lambda line: line.endswith(f"] {b}: let go: eqdelete.maintain.enabled=false"))
        err.wait_for(lambda line: f"] {lost}: failed: " in line, seconds=60)
        service.send_signal(signal.SIGTERM)
        service.wait(timeout=120)
        out.join(timeout=10)
        err.join(timeout=10)
    finally:
        service.kill()
    stderr = "\n".join(err.lines)
    assert service.returncode == 0, stderr[-3000:]
    assert not any(json.loads(line)["table"] == b and json.loads(line)["rows_resolved"] for line in out.lines[mark:])
    assert "picked up" in stderr and "maintained 3 table(s):" in stderr, stderr[-3000:]
    # Each failed round of the lost table is one line: no trace of Spark's failed tasks.
    failed = [line for line in err.lines if f"] {lost}: failed: " in line]
    assert failed and all("cannot read equality delete file" in line for line in failed), failed
    traces = [line for line in err.lines if line.lstrip().startswith(("at ", "Caused by:")) or " ERROR " in line]
    assert not traces, traces[:20]
    expected_a = {k: "v0" for k in range(9, 100) if not 20 <= k < 20 + 3 * i}
    assert rows_of(spark, a) == expected_a and rows_of(spark, a, "auto") == expected_a
    # Each driver saved its index in a directory of its own; started again, a driver restores the
    # newest version saved (the service's or this session's) and brings it forward.
    location = spark.sql(f"DESCRIBE TABLE EXTENDED {a}").filter("col_name = 'Location'").first().data_type
    saved = {p.parent.name for p in Path(location.removeprefix("file:")).glob("_eqdelete_state/*/live-index/*/*/v*.json")}
    assert len(saved) >= 2, saved
    _jvm.forget_kept_indexes(spark, a)
    eqdelete.write_equality_deletes(spark, a, ["k"], [(95,), (96,)])
    with eqdelete.use_conf(spark, KEPT):
        restarted = eqdelete.maintain_round(spark, a, keep_index=True)
    assert "restored from version" in (restarted.live_index_note or "") and restarted.rows_resolved == 2, restarted.render()
    _jvm.forget_kept_indexes(spark, a)
    assert rows_of(spark, a) == {k: v for k, v in expected_a.items() if k not in (95, 96)}
    assert rows_of(spark, b) == {k: "v0" for k in range(8, 100)}
    assert [s.equality_delete_files for s in status(spark, b)] == [1]  # let be
    for table in (a, b, lost):
        spark.sql(f"DROP TABLE {table}")


def test_a_table_another_maintain_holds_is_left_to_it_until_it_lets_go(spark: SparkSession, namespace: str) -> None:
    """One table wants one maintain: a table whose lease another process renewed lately is left
    to it (said once: held), and taken over as soon as that one lets it go; the service's own
    lease goes when it stops, so the next process takes the table at once."""
    table = f"{namespace}.held"
    expected = create(spark, table, 2)
    eqdelete.write_equality_deletes(spark, table, ["k"], [(k,) for k in range(5)])
    other = "another-host:1:app-other"
    assert _jvm.claim_maintain_lease(spark, table, other, 3600) is None
    events: list[ServiceEvent] = []
    stop = threading.Event()
    service = threading.Thread(target=lambda: maintain_tables(spark, table, interval=0.5, stop=stop, on_event=events.append))
    service.start()
    try:
        until(lambda: any(e.kind == "held" for e in events), "held")
        time.sleep(2)  # several intervals: still left to the other, and said once
        assert [e.kind for e in events if e.table == table].count("held") == 1, events
        assert [s.equality_delete_files for s in status(spark, table)] == [1]
        assert _jvm.claim_maintain_lease(spark, table, other, 3600) is None  # the other still holds it
        _jvm.release_maintain_lease(spark, table, other)
        until(lambda: [s.equality_delete_files for s in status(spark, table)] == [0], "resolved once let go")
        # The round commits before the service hears of it and says so.
        until(lambda: any(e.kind == "picked up" and "let it go" in e.message for e in events), "picked up")
        held = _jvm.claim_maintain_lease(spark, table, other, 3600)
        assert held is not None and held.startswith(f"{socket.gethostname()}:{os.getpid()}:"), held
    finally:
        stop.set()
        service.join(timeout=120)
    assert _jvm.claim_maintain_lease(spark, table, other, 3600) is None  # released at the stop
    _jvm.release_maintain_lease(spark, table, other)
    assert rows_of(spark, table) == {k: v for k, v in expected.items() if k >= 5}
