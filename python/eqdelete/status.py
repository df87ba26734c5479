"""The equality-delete debt of a lakehouse's tables: ``status(spark, "lake.db.*")`` and
``python -m eqdelete status --tables PATTERN`` show, per table, what its live equality deletes
cost a reader and what ``maintain`` would do next, from metadata only. Served on the JVM by
``SELECT * FROM eqdelete_status('<pattern>')`` (also over Spark Connect)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Optional

from pyspark.sql import SparkSession

from eqdelete import _remote


@dataclass(frozen=True)
class TableStatus:
    """One table's debt (``eqdelete.maintain.TableStatus`` on the JVM; the same fields).

    ``native_over_floor`` estimates what Iceberg's own reader does to read the whole table over
    what reading it compacted costs: every data row plus every equality delete row each task
    loads, over the live rows (rows and delete rows counted alike: it ranks debt, it is not a
    time). ``position_delete_files_per_data_file`` is the most a reader of one data file opens;
    ``dead_row_ratio`` the rows position deletes or deletion vectors remove over the data rows.
    ``native_misreads`` says why Iceberg's own reader (and every other engine reading the equality
    deletes) reads the table wrongly until it is resolved, if it does (docs/known-iceberg-issues.md).
    ``next`` says what the next round of ``maintain`` would do; ``error`` why the table could not
    be looked at (its other fields are then zero)."""

    table: str
    snapshot_id: Optional[int]
    format_version: int
    data_files: int
    data_rows: int
    equality_delete_files: int
    equality_delete_rows: int
    lag_seconds: float
    position_delete_files: int
    position_deleted_rows: int
    position_delete_files_per_data_file: int
    dead_row_ratio: float
    native_over_floor: float
    maintain_enabled: bool
    interval_seconds: Optional[int]
    native_misreads: Optional[str]
    next: str
    error: Optional[str]

    @property
    def in_debt(self) -> bool:
        return self.equality_delete_files > 0


def status(spark: SparkSession, tables: str) -> list[TableStatus]:
    """The status of each table ``tables`` names: a table, a namespace (every table under it), a
    catalog, or globs on any part (``lake.db.orders_*``); several separated by commas. A table
    that cannot be read gets a row with its ``error``."""
    if not isinstance(tables, str) or not tables.strip():
        raise ValueError(f"tables must be a table pattern such as 'lake.db.*', not {tables!r}")
    rows = _remote.function_rows(spark, f"SELECT * FROM eqdelete_status({_remote.literal(tables)})")
    return [TableStatus(**{name: row[name] for name in TableStatus.__dataclass_fields__}) for row in rows]


_COLUMNS = (
    ("table", "table"), ("eq files", "equality_delete_files"), ("eq rows", "equality_delete_rows"),
    ("lag s", "lag_seconds"), ("native/floor", "native_over_floor"), ("pos files/data file", "position_delete_files_per_data_file"),
    ("dead rows", "dead_row_ratio"), ("next", "next"),
)


def _cell(status: TableStatus, field: str) -> str:
    value = getattr(status, field)
    if field == "next" and status.error:
        return f"error: {status.error}"
    if field == "dead_row_ratio":
        return f"{value:.1%}"
    if field == "native_over_floor":
        return f"{value:.2f}x"
    if field == "lag_seconds":
        return f"{value:,.0f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def render(statuses: list[TableStatus]) -> str:
    """A human table: tables that failed first, then the most indebted (``by_debt``)."""
    if not statuses:
        return "no Iceberg table matches"
    cells = [[_cell(s, field) for _, field in _COLUMNS] for s in by_debt(statuses)]
    widths = [max(len(title), *(len(row[i]) for row in cells)) for i, (title, _) in enumerate(_COLUMNS)]
    numeric = [i not in (0, len(_COLUMNS) - 1) for i in range(len(_COLUMNS))]

    def line(values: list[str]) -> str:
        return "  ".join(v.rjust(w) if n else v.ljust(w) for v, w, n in zip(values, widths, numeric)).rstrip()

    misread = [f"{s.table}: {s.native_misreads}; resolving fixes it for every reader" for s in statuses if s.native_misreads]
    notes = ["", "Iceberg's own reader reads these wrongly (eqdelete reads them right):", *misread] if misread else []
    return "\n".join([line([t for t, _ in _COLUMNS]), line(["-" * w for w in widths]), *map(line, cells), *notes])


def as_json(statuses: list[TableStatus]) -> str:
    """One JSON array of the rows, every field."""
    return json.dumps([asdict(s) for s in statuses], indent=2)


def by_debt(statuses: list[TableStatus]) -> list[TableStatus]:
    """Failed tables first, then by native's estimated cost over the floor and the lag."""
    return sorted(statuses, key=lambda s: (s.error is None, -s.native_over_floor, -s.lag_seconds, s.table))
