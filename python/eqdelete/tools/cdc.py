"""A CDC table generator: a base load, then commits that upsert or delete a share of the keys.

Each commit is written as a Flink upsert sink writes it: one RowDelta holding the equality
deletes of every touched key and the new versions of the upserted keys, so the new versions
survive the deletes of their own commit (sequence numbers) while older versions are gone.

Everything is derived from ``(seed, commit, id)`` with Spark's hash functions, so a table is
reproducible, generation is distributed, and the expected final rows can be computed
independently of Iceberg (``CdcSpec.expected``).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from eqdelete import _remote
from eqdelete._progress import stderr_reporter
from eqdelete.config import PROCEDURE_CATALOG
from eqdelete.deletes import write_equality_deletes

#: ``uuid_string``: a random-looking 36-character UUID in a STRING column (what Debezium and
#: Kafka Connect write); ``uuid``: the same values in a column of Iceberg's ``uuid`` type.
KEY_TYPES = ("int", "long", "string", "date", "decimal", "timestamp", "uuid_string", "uuid")
PARTITIONINGS = {
    "none": None,
    "identity": "region",
    "bucket": "bucket(8, k1)",
    "day": "days(created_at)",
}
REGIONS = 8
_DATE_LIMIT = 2_900_000  # days after 2000-01-01 that stay before year 9999
_HASH_BUCKETS = 1_000_000
#: How the base load lays keys out over its files: ``scattered``, every file a random share of
#: all keys (a streaming sink's files); ``clustered``, each file one key range, sorted (a table
#: written or compacted in key order).
LAYOUTS = ("scattered", "clustered")


@dataclass(frozen=True)
class CdcSpec:
    """Parameters of a generated table; ``validate`` explains any nonsense."""

    table: str
    rows: int = 100_000
    data_files: int = 4
    commits: int = 10
    delete_fraction: float = 0.005
    upsert_fraction: float = 0.01
    key_types: tuple[str, ...] = ("long",)
    partitioning: str = "none"
    format_version: int = 2
    seed: int = 0
    files_per_commit: int = 1
    layout: str = "scattered"
    extra_properties: dict[str, str] = field(default_factory=dict)

    def validate(self) -> None:
        problems = []
        if self.table.count(".") < 2:
            problems.append(f"table {self.table!r} should be <catalog>.<namespace>.<table>, e.g. local.db.cdc")
        if self.rows < 1:
            problems.append(f"rows must be at least 1, not {self.rows}")
        if self.data_files < 1:
            problems.append(f"data_files must be at least 1, not {self.data_files}")
        if self.commits < 0:
            problems.append(f"commits cannot be negative ({self.commits})")
        if self.files_per_commit < 1:
            problems.append(f"files_per_commit must be at least 1, not {self.files_per_commit}")
        for name in ("delete_fraction", "upsert_fraction"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                problems.append(f"{name} must be between 0 and 1, not {value}")
        if self.delete_fraction + self.upsert_fraction > 1.0:
            problems.append(
                "delete_fraction + upsert_fraction cannot exceed 1 "
                f"({self.delete_fraction} + {self.upsert_fraction})"
            )
        if not 1 <= len(self.key_types) <= 3:
            problems.append(f"between 1 and 3 key columns, not {len(self.key_types)}")
        unknown = [t for t in self.key_types if t not in KEY_TYPES]
        if unknown:
            problems.append(f"unknown key type(s) {', '.join(unknown)}: choose from {', '.join(KEY_TYPES)}")
        if self.partitioning not in PARTITIONINGS:
            problems.append(
                f"unknown partitioning {self.partitioning!r}: choose from {', '.join(PARTITIONINGS)}"
            )
        if self.layout not in LAYOUTS:
            problems.append(f"unknown layout {self.layout!r}: choose from {', '.join(LAYOUTS)}")
        if self.format_version not in (2, 3):
            problems.append(f"format_version must be 2 or 3 (equality deletes need v2+), not {self.format_version}")
        if not problems and "date" in self.key_types:
            for position, key_type in enumerate(self.key_types):
                if key_type == "date" and self._max_component(position) > _DATE_LIMIT:
                    problems.append(
                        f"a date key column k{position + 1} cannot hold {self.rows} distinct values "
                        "before year 9999: use fewer rows, more key columns, or another type there"
                    )
        if problems:
            raise ValueError("invalid CDC table parameters: " + "; ".join(problems))

    # -- keys ---------------------------------------------------------------------------

    @property
    def key_columns(self) -> list[str]:
        return [f"k{i + 1}" for i in range(len(self.key_types))]

    @property
    def _radix(self) -> int:
        """Mixed-radix base splitting an id over the key columns, keeping keys unique."""
        n = len(self.key_types)
        radix = max(2, math.ceil(self.rows ** (1.0 / n)))
        while radix ** n < self.rows:
            radix += 1
        return radix

    def _max_component(self, position: int) -> int:
        n = len(self.key_types)
        return (self.rows - 1) // self._radix ** (n - 1) if position == 0 else self._radix - 1

    def _key_columns(self, id_col: Column) -> list[Column]:
        n, radix = len(self.key_types), self._radix
        columns = []
        for position, key_type in enumerate(self.key_types):
            number = F.floor(id_col / F.lit(radix ** (n - 1 - position)))
            if position > 0:
                number = F.pmod(number, F.lit(radix))
            columns.append(_typed(number.cast("long"), key_type).alias(f"k{position + 1}"))
        return columns

    # -- rows ---------------------------------------------------------------------------

    def _rows(self, ids: DataFrame, version: Column) -> DataFrame:
        """Full table rows for ``ids`` at ``version``; partition sources derive from the id."""
        id_col = F.col("id")
        return ids.select(
            *self._key_columns(id_col),
            F.pmod(id_col, F.lit(REGIONS)).cast("int").alias("region"),
            F.timestamp_seconds(F.lit(1_700_000_000) + F.pmod(id_col, F.lit(REGIONS)) * 86_400 + F.pmod(id_col, F.lit(86_400)))
            .alias("created_at"),
            version.cast("int").alias("version"),
            F.sha2(F.concat_ws(":", F.lit(self.seed), id_col, version), 256).substr(1, 16).alias("payload"),
            (F.pmod(F.xxhash64(F.lit(self.seed), id_col, version), F.lit(100_000)) / 100.0).alias("amount"),
        )

    def _ids(self, spark: SparkSession) -> DataFrame:
        return spark.range(0, self.rows, 1, max(1, min(self.data_files, 64)))

    def _op(self, commit: int | Column) -> Column:
        """'delete', 'upsert' or NULL for each id in ``commit`` (a number, or an int column);
        uniform from the hash."""
        number = F.lit(commit) if isinstance(commit, int) else commit
        u = F.pmod(F.xxhash64(F.lit(self.seed), number, F.col("id")), F.lit(_HASH_BUCKETS)) / _HASH_BUCKETS
        return (
            F.when(u < self.delete_fraction, F.lit("delete"))
            .when(u < self.delete_fraction + self.upsert_fraction, F.lit("upsert"))
        )

    def columns_ddl(self) -> str:
        """The table's columns as DDL (a ``uuid`` key as STRING: Spark's DDL has no uuid type, see ``create``)."""
        key_ddl = ", ".join(f"{c} {_SQL_TYPES[t]}" for c, t in zip(self.key_columns, self.key_types))
        return f"{key_ddl}, region INT, created_at TIMESTAMP, version INT, payload STRING, amount DOUBLE"

    def ddl(self) -> str:
        partition = PARTITIONINGS[self.partitioning]
        props = ", ".join(f"'{k}'='{v}'" for k, v in self.properties().items())
        return (
            f"CREATE TABLE {self.table} ({self.columns_ddl()}) USING iceberg"
            + (f" PARTITIONED BY ({partition})" if partition else "")
            + f" TBLPROPERTIES ({props})"
        )

    def create(self, spark: SparkSession) -> None:
        """Creates the (absent) table: by its DDL, or with ``uuid`` keys through Iceberg's catalog API."""
        uuid_keys = {c for c, t in zip(self.key_columns, self.key_types) if t == "uuid"}
        if not uuid_keys:
            spark.sql(self.ddl())
            return
        if _remote.is_remote(spark):
            raise ValueError("a uuid key column needs Iceberg's Java API: generate the table in a classic session")
        # Spark's schema of the DDL, converted by Iceberg (its field ids), with uuid keys retyped.
        from eqdelete._jvm import _class, iceberg_catalog

        schema = _class(spark, "org.apache.iceberg.spark.SparkSchemaUtil").convert(
            _class(spark, "org.apache.spark.sql.types.StructType").fromDDL(self.columns_ddl()))
        types = spark.sparkContext._jvm.org.apache.iceberg.types.Types  # noqa: SLF001
        fields = [types.NestedField.optional(f.fieldId(), f.name(), types.UUIDType.get()) if f.name() in uuid_keys else f
                  for f in schema.columns()]
        schema = spark.sparkContext._jvm.org.apache.iceberg.Schema(fields)  # noqa: SLF001
        builder = _class(spark, "org.apache.iceberg.PartitionSpec").builderFor(schema)
        partition = {"none": lambda b: b, "identity": lambda b: b.identity("region"),
                     "bucket": lambda b: b.bucket("k1", 8), "day": lambda b: b.day("created_at")}[self.partitioning]
        catalog, identifier = iceberg_catalog(spark, self.table)
        catalog.createTable(identifier, schema, partition(builder).build(), self.properties())

    def properties(self) -> dict[str, str]:
        """The table's properties: merge-on-read, and the base load's files as asked."""
        return {
            "format-version": str(self.format_version),
            "write.delete.mode": "merge-on-read",
            "write.update.mode": "merge-on-read",
            "write.merge.mode": "merge-on-read",
            # The base load keeps one file per write task and partition, as asked.
            "write.distribution-mode": "none",
            "write.spark.fanout.enabled": "true",
            **self.extra_properties,
        }

    def expected(self, spark: SparkSession) -> DataFrame:
        """The rows the table must hold after all commits, computed without Iceberg."""
        ids = self._ids(spark)
        # The last commit touching each id (greatest skips NULLs), then what it did there: one
        # flat expression, where a chain of CASEs over every commit outgrew code generation.
        touched = [F.when(self._op(commit).isNotNull(), F.lit(commit)) for commit in range(1, self.commits + 1)]
        last = (F.greatest(*touched) if len(touched) > 1 else touched[0]) if touched else F.lit(None).cast("int")
        final = ids.select("id", last.alias("last"))
        alive = final.where(F.col("last").isNull() | (self._op(F.col("last")) == "upsert"))
        version = F.coalesce(F.col("last"), F.lit(0))
        return self._rows(alive.select("id", version.alias("v")), F.col("v"))


_SQL_TYPES = {
    "int": "INT",
    "long": "BIGINT",
    "string": "STRING",
    "date": "DATE",
    "decimal": "DECIMAL(18,2)",
    "timestamp": "TIMESTAMP",
    "uuid_string": "STRING",
    "uuid": "STRING",  # created as Iceberg's uuid type (CdcSpec.create); Spark reads it as a string
}


def _typed(number: Column, key_type: str) -> Column:
    if key_type == "int":
        return number.cast("int")
    if key_type == "long":
        return number
    if key_type == "string":
        return F.concat(F.lit("key-"), number.cast("string"))
    if key_type == "date":
        return F.date_add(F.lit("2000-01-01").cast("date"), number.cast("int"))
    if key_type == "decimal":
        return number.cast("decimal(18,2)")
    if key_type in ("uuid_string", "uuid"):
        # 128 bits from two hashes of the number, written as a UUID: unique for every table here.
        hexes = [F.lpad(F.lower(F.hex(F.xxhash64(F.lit(seed), number))), 16, "0") for seed in (0x5EED, 0xC0DE)]
        parts = [hexes[0].substr(1, 8), hexes[0].substr(9, 4), hexes[0].substr(13, 4), hexes[1].substr(1, 4), hexes[1].substr(5, 12)]
        return F.concat_ws("-", *parts)
    return F.timestamp_seconds(F.lit(1_500_000_000) + number)


_stderr_progress = stderr_reporter("eqdelete generate")


def _settings(spark: SparkSession) -> list[tuple[str, str]]:
    """Every setting of the session: Spark Connect's runtime config, or the classic SparkConf."""
    if _remote.is_remote(spark):
        return list(spark.conf.getAll.items())
    return list(spark.sparkContext.getConf().getAll())


def _check_writer(spark: SparkSession) -> None:
    """Fail before anything is created unless the session can write equality deletes: eqdelete
    loaded and, on Spark Connect, its procedure catalog configured on the server."""
    if not _remote.has_extension(spark):
        raise _remote.not_loaded_error(spark)
    if _remote.is_remote(spark) and spark.conf.get(f"spark.sql.catalog.{PROCEDURE_CATALOG}", None) is None:
        raise ValueError(
            f"cannot write equality deletes over Spark Connect: the server has no spark.sql.catalog.{PROCEDURE_CATALOG} "
            "(start it with `python -m eqdelete connect-server`)"
        )


def _check_iceberg_catalog(spark: SparkSession, table: str) -> None:
    catalog = table.split(".", 1)[0]
    implementation = spark.conf.get(f"spark.sql.catalog.{catalog}", None)
    if implementation is None or not implementation.startswith("org.apache.iceberg."):
        configured = sorted(
            key.split(".")[3] for key, value in _settings(spark)
            if key.startswith("spark.sql.catalog.") and key.count(".") == 3 and value.startswith("org.apache.iceberg.")
        )
        what = "is not configured" if implementation is None else f"is {implementation}, not an Iceberg catalog"
        raise ValueError(
            f"cannot create {table}: catalog '{catalog}' {what} in this session "
            f"(Iceberg catalogs configured: {', '.join(configured) or 'none'})"
        )


def generate(
    spark: SparkSession,
    spec: CdcSpec,
    *,
    replace: bool = False,
    progress: Callable[[str], None] | None = _stderr_progress,
) -> CdcSpec:
    """Create ``spec.table`` and write its base load and CDC commits; returns ``spec``.

    The table's catalog must be an Iceberg catalog of the session: checked before anything is
    created, so a wrong name leaves nothing behind (not even Spark's own spark-warehouse/).
    """
    spec.validate()
    _check_iceberg_catalog(spark, spec.table)
    _check_writer(spark)
    report = progress or (lambda _message: None)
    if spark.catalog.tableExists(spec.table):
        if not replace:
            raise ValueError(f"{spec.table} already exists: pass replace=True (--replace) to recreate it")
        spark.sql(f"DROP TABLE {spec.table} PURGE")
    namespace = spec.table.rsplit(".", 1)[0]
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {namespace}")
    spec.create(spark)
    try:
        _write_history(spark, spec, report)
    except BaseException:
        # A half-written history is no table to measure: drop it, files included.
        spark.sql(f"DROP TABLE IF EXISTS {spec.table} PURGE")
        raise
    return spec


def _write_history(spark: SparkSession, spec: CdcSpec, report: Callable[[str], None]) -> None:
    """The base load and the CDC commits of ``spec``, into its freshly created table."""

    started = time.monotonic()
    report(f"base load: {spec.rows:,} rows in {spec.data_files} write task(s)")
    base = spec._rows(spec._ids(spark), F.lit(0))
    if spec.layout == "clustered":
        base = base.repartitionByRange(spec.data_files, *spec.key_columns).sortWithinPartitions(*spec.key_columns)
    else:
        base = base.repartition(spec.data_files)
    base.writeTo(spec.table).append()

    for commit in range(1, spec.commits + 1):
        counts = write_commit(spark, spec, commit)
        report(
            f"commit {commit}/{spec.commits}: {counts.get('delete', 0):,} deleted, "
            f"{counts.get('upsert', 0):,} upserted ({time.monotonic() - started:.1f}s)"
        )


def write_commit(spark: SparkSession, spec: CdcSpec, commit: int) -> dict[str, int]:
    """CDC commit number ``commit`` of ``spec`` (its deletes and upserts, drawn for that number),
    written to its table as one snapshot; how many rows of each kind."""
    events = spec._ids(spark).select("id", spec._op(commit).alias("op")).where("op IS NOT NULL")
    events = events.cache()
    counts = {r["op"]: r["count"] for r in events.groupBy("op").count().collect()}
    # Whole rows: the writer keeps the key columns and the partition sources it needs.
    touched = spec._rows(events.select("id"), F.lit(commit))
    upserted = spec._rows(events.where("op = 'upsert'").select("id"), F.lit(commit))
    if counts:
        write_equality_deletes(
            spark,
            spec.table,
            spec.key_columns,
            touched,
            inserts=upserted.repartition(1) if counts.get("upsert") else None,
            files_per_partition=spec.files_per_commit,
        )
    events.unpersist()
    return counts
