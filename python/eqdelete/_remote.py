"""Spark Connect sessions: telling them apart, and reaching the extension through SQL.

A Connect session has no JVM in the Python process, so every operation of the package has a
SQL form the extension serves on the server: table-valued functions for what only reports
(``eqdelete_decisions``, ``eqdelete_last_decisions``, ``eqdelete_table_files``) and procedures
in eqdelete's catalog for what commits (``CALL eqdelete.system.write_equality_deletes``,
``resolve_equality_deletes``). DataFrames reach them as temporary views.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from eqdelete import _jvm
from eqdelete.errors import ExtensionNotLoadedError, from_message


def is_remote(session_or_frame: SparkSession | DataFrame) -> bool:
    """True for a Spark Connect session or DataFrame. Decided by the object's own class, not
    pyspark's process-wide connect mode, so classic and Connect objects can be told apart."""
    return type(session_or_frame).__module__.startswith("pyspark.sql.connect")


def literal(text: str) -> str:
    """``text`` as a SQL string literal (Spark's default escaping: backslash escapes)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


@contextmanager
def temp_view(frame: DataFrame) -> Iterator[str]:
    """A session-scoped temporary view of ``frame`` for the block, dropped after it."""
    name = f"eqdelete_{uuid.uuid4().hex}"
    frame.createOrReplaceTempView(name)
    try:
        yield name
    finally:
        frame.sparkSession.catalog.dropTempView(name)


def rows(spark: SparkSession, sql: str) -> list[dict[str, Any]]:
    """The rows of ``sql`` as dicts."""
    return [row.asDict() for row in spark.sql(sql).collect()]


def function_rows(spark: SparkSession, sql: str) -> list[dict[str, Any]]:
    """The rows of ``sql``, a query of eqdelete's table-valued functions. Raises
    ``ExtensionNotLoadedError`` (saying why where the JVM is reachable) when the session has no
    eqdelete, rather than Spark's unresolved-function error."""
    try:
        return rows(spark, sql)
    except Exception as error:
        if has_extension(spark):
            raise
        raise not_loaded_error(spark) from error


def not_loaded_error(spark: SparkSession) -> ExtensionNotLoadedError:
    """The error for a session without eqdelete, saying why where it can be told."""
    if is_remote(spark):
        why = "the Spark Connect server was started without it (`python -m eqdelete connect-server` starts one with it)"
    else:
        why = _jvm.why_unsupported(spark) or "spark.sql.extensions does not name eqdelete.EqualityDeleteExtensions"
    return ExtensionNotLoadedError(f"eqdelete is not loaded in this session: {why}")


def has_extension(spark: SparkSession) -> bool:
    """Whether the session's server side has eqdelete loaded (``eqdelete_version()`` resolves)."""
    try:
        spark.sql("SELECT eqdelete_version()").collect()
    except Exception:  # noqa: BLE001 - any failure means the function is not there
        return False
    return True


def _argument(value: str | bool | int | Sequence[str]) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return f"{value}L"
    if isinstance(value, str):
        return literal(value)
    return f"array({', '.join(literal(v) for v in value)})"


def call(spark: SparkSession, procedure: str, **arguments: str | bool | int | Sequence[str] | None) -> dict[str, Any]:
    """``CALL procedure(name => value, ...)`` of a procedure returning one row; None arguments
    are left out (the procedure's default)."""
    named = ", ".join(f"{name} => {_argument(value)}" for name, value in arguments.items() if value is not None)
    try:
        [row] = rows(spark, f"CALL {procedure}({named})")
    except Exception as error:
        # The server sends the JVM exception's message: eqdelete's own errors are told by it.
        known = from_message(str(error))
        if known is not None:
            raise known from None
        raise
    return row
