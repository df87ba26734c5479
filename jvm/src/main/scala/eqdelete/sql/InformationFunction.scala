package eqdelete.sql

import eqdelete.explain.{Decision, DecisionLog, Decisions}
import eqdelete.maintain.TableStatus

import org.apache.spark.sql.{functions => F, SparkSession}
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.eqdelete.compat.{IcebergSparkTables, SparkInternals}
import org.apache.spark.sql.types.{IntegerType, LongType, StringType, StructType}

/**
 * A table-valued function of eqdelete: it reports and changes nothing, so it is a `SELECT`
 * (what changes a table is a procedure, `EqDeleteProcedure`). Its rows are computed when the
 * query runs, never while it is planned; the decision log does not count such a query as the
 * session's last (`DecisionLog`).
 */
private[eqdelete] sealed trait InformationFunction {
  def name: String
  /** What `DESCRIBE FUNCTION` shows. */
  def usage: String
  def arguments: Seq[String]
  def output: StructType
  def rows(session: SparkSession, arguments: Seq[String]): Seq[InternalRow]
}

private[eqdelete] object InformationFunction {
  val all: Seq[InformationFunction] = Seq(DecisionsFunction, LastDecisionsFunction, TableFilesFunction, StatusFunction)

  /** One decision per row, in the fields of Python's `eqdelete.Decision`. */
  val decisionRows: SqlRows = SqlRows(Seq(
    "table" -> StringType, "snapshot_id" -> LongType, "strategy" -> StringType, "reason" -> StringType,
    "plan" -> StringType, "delete_files" -> IntegerType, "delete_rows" -> LongType, "data_files" -> IntegerType,
    "data_files_with_deletes" -> IntegerType, "covered_delete_rows" -> LongType), nullable = Set("covered_delete_rows"))

  def decisionRow(d: Decision): InternalRow = decisionRows.row(d.record)
}

/** `SELECT * FROM eqdelete_decisions('<query>')`: the decisions of a query, planned and not run. */
private[eqdelete] object DecisionsFunction extends InformationFunction {
  override val name = "eqdelete_decisions"
  override val usage = "_FUNC_(query) - What eqdelete decides for each Iceberg scan of the SQL query, planned and not run: " +
    "one row per scan (table, snapshot_id, strategy, reason, plan, delete_files, delete_rows, data_files, " +
    "data_files_with_deletes, covered_delete_rows)."
  override val arguments = Seq("query")
  override def output: StructType = InformationFunction.decisionRows.schema

  override def rows(session: SparkSession, arguments: Seq[String]): Seq[InternalRow] =
    Decisions.of(SparkInternals.optimizedWithoutRunning(session, arguments.head)).map(InformationFunction.decisionRow)
}

/** `SELECT * FROM eqdelete_last_decisions()`: the decisions of the last query the session ran. */
private[eqdelete] object LastDecisionsFunction extends InformationFunction {
  override val name = "eqdelete_last_decisions"
  override val usage = "_FUNC_() - What eqdelete decided for each Iceberg scan of the last query this session ran " +
    "(the same fields as eqdelete_decisions; covered_delete_rows as counted while it ran)."
  override val arguments = Nil
  override def output: StructType = InformationFunction.decisionRows.schema

  override def rows(session: SparkSession, arguments: Seq[String]): Seq[InternalRow] =
    DecisionLog.lastQuery(session).map(InformationFunction.decisionRow)
}

/**
 * `SELECT * FROM eqdelete_table_files('<table>')`: the live files of the table's current
 * snapshot by content (data, position deletes, equality deletes) and, for equality deletes, by
 * equality columns: how many, their records and bytes.
 */
private[eqdelete] object TableFilesFunction extends InformationFunction {
  override val name = "eqdelete_table_files"
  override val usage = "_FUNC_(table) - The live files of an Iceberg table's current snapshot, one row per content " +
    "(data, position deletes, equality deletes) and set of equality columns: content, equality_columns, files, records, bytes."
  override val arguments = Seq("table")

  private val contents = Map(0 -> "data", 1 -> "position deletes", 2 -> "equality deletes")
  val rowsOf: SqlRows = SqlRows(Seq("content" -> StringType, "equality_columns" -> StringType, "files" -> LongType,
    "records" -> LongType, "bytes" -> LongType), nullable = Set("equality_columns"))
  override def output: StructType = rowsOf.schema

  override def rows(session: SparkSession, arguments: Seq[String]): Seq[InternalRow] = {
    val table = arguments.head
    val schema = IcebergSparkTables.load(session, table).schema()
    val grouped = session.table(s"$table.files")
      .groupBy(F.col("content"), F.col("equality_ids"))
      .agg(F.count(F.lit(1)), F.sum("record_count"), F.sum("file_size_in_bytes"))
      .collect()
    grouped.map { r =>
      val ids = if (r.isNullAt(1)) Nil else r.getSeq[Int](1)
      val columns = if (ids.isEmpty) None else Some(ids.map(id => Option(schema.findColumnName(id)).getOrElse(s"#$id")).mkString(", "))
      (contents.getOrElse(r.getInt(0), s"content ${r.getInt(0)}"), columns, r.getLong(2), r.getLong(3), r.getLong(4))
    }.sortBy { case (content, columns, _, _, _) => (content, columns.getOrElse("")) }.map { case (content, columns, files, records, bytes) =>
      rowsOf.row(Map("content" -> content, "equality_columns" -> columns, "files" -> files, "records" -> records, "bytes" -> bytes))
    }.toSeq
  }
}

/**
 * `SELECT * FROM eqdelete_status('<pattern>')`: each matching table's equality-delete debt and
 * what maintain would do next ([[TableStatus]]), the rows `python -m eqdelete status` prints.
 */
private[eqdelete] object StatusFunction extends InformationFunction {
  override val name = "eqdelete_status"
  override val usage = "_FUNC_(pattern) - The equality-delete debt of each Iceberg table the pattern names (a table, a " +
    "namespace, a catalog, or globs such as 'lake.db.orders_*'; several separated by commas), from metadata: live " +
    "equality delete files and rows, the lag, native's estimated cost over the floor, position delete files per data " +
    "file, the dead-row ratio, the table's maintain settings, and what maintain would do next; a table that cannot be " +
    "read gets a row with its error."
  override val arguments = Seq("pattern")

  val rowsOf: SqlRows = SqlRows(TableStatus.Fields, nullable = TableStatus.Nullable)
  override def output: StructType = rowsOf.schema

  override def rows(session: SparkSession, arguments: Seq[String]): Seq[InternalRow] =
    TableStatus.of(session, arguments.head).map(status => rowsOf.row(status.asMap))
}
