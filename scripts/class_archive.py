"""Dump a class archive (JDK's dynamic CDS) of a Spark line's JVM for the tests, run by
scripts/setup.sh in each Spark line's virtualenv:  <venv>/bin/python scripts/class_archive.py <archive>

A Spark JVM of the tests spends its first seconds loading and verifying Spark's classes; mapped
from an archive they load in a fraction of that (a short session: 27 s without, 17 s with).
tests/conftest.py hands the archive to every Spark JVM the tests start (SPARK_SUBMIT_OPTS). The
archive holds the classes of the JVM's class path (Spark's jars of this virtualenv, checked by
their paths, sizes and times: another virtualenv's JVM, or this one's after a reinstall, loads
its classes as usual); those of jars added to a session (Iceberg's, eqdelete's) load as usual.

The training is a short session doing what the tests do most: tables written and read through
Iceberg's SQLite catalog, equality deletes committed, reads under every strategy, a plan
explained. The archive is written when the JVM exits: this waits for that."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path


def _train(archive: Path) -> None:
    import eqdelete

    with tempfile.TemporaryDirectory(prefix="eqdelete-class-archive-") as warehouse:
        spark = eqdelete.session("eqdelete-class-archive", master="local[2]", warehouse=warehouse,
                                 conf={"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
                                       "spark.sql.shuffle.partitions": "4",
                                       "spark.sql.warehouse.dir": Path(warehouse, "spark-warehouse").as_uri()})
        spark.sparkContext.setLogLevel("ERROR")
        table = "local.db.t"
        spark.sql("CREATE NAMESPACE IF NOT EXISTS local.db")
        spark.sql(f"CREATE TABLE {table} (k BIGINT, p INT, v STRING) USING iceberg PARTITIONED BY (p) "
                  "TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read')")
        spark.sql(f"INSERT INTO {table} SELECT id, CAST(id % 2 AS INT), CAST(id AS STRING) FROM range(1000)")
        eqdelete.write_equality_deletes(spark, table, ["k", "p"], [(k, k % 2) for k in range(0, 1000, 7)])
        for strategy in eqdelete.STRATEGIES:
            with eqdelete.use_strategy(spark, strategy):
                spark.table(table).where("v <> 'x'").groupBy("p").count().collect()
                spark.sql(f"SELECT * FROM {table} a JOIN {table} b USING (k)").explain("formatted")
        spark.sql(f"DELETE FROM {table} WHERE k < 10")
        spark.sql(f"SELECT count(*) FROM {table}.files").collect()
        jvm = spark.sparkContext._gateway.proc  # the JVM's process: spark-submit exec'd java
        spark.stop()
    # The JVM exits when its standard input closes, and writes the archive as it exits.
    jvm.stdin.close()
    if jvm.wait(timeout=300) != 0 or not archive.is_file():
        sys.exit(f"the JVM did not write {archive} (exit code {jvm.returncode})")


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit(__doc__.splitlines()[1])
    archive = Path(sys.argv[1]).resolve()
    archive.unlink(missing_ok=True)
    # Written beside, then moved, so a JVM never maps half an archive.
    partial = archive.with_name(archive.name + ".part")
    partial.unlink(missing_ok=True)
    os.environ["SPARK_SUBMIT_OPTS"] = (f"{os.environ.get('SPARK_SUBMIT_OPTS', '')} -XX:TieredStopAtLevel=1 "
                                       f"-XX:ArchiveClassesAtExit={partial} -Xlog:cds*=off").strip()
    _train(partial)
    partial.replace(archive)


if __name__ == "__main__":
    main()
