package eqdelete.sql

import scala.jdk.CollectionConverters._

import eqdelete.maintain.{MaintainRound, RoundResult}
import eqdelete.resolve.ResolveEqualityDeletes
import eqdelete.write.EqualityDeleteWriter

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.types.{ArrayType, BooleanType, DoubleType, IntegerType, LongType, StringType, StructType}

/**
 * One of eqdelete's SQL procedures (`CALL eqdelete.system.<name>(...)`), apart from the procedure
 * API of any Spark line: `EqDeleteProcedureCatalog` (the `spark-4.x` shim) adapts it to Spark 4.x's
 * own CALL; on Spark 3.5, which has no CALL, `ProcedureCallParser` and `EqDeleteCallCommand` (the
 * `spark-3.5` shim) serve the same statement. They are the statements that change a table; what
 * only reports is a table-valued function (`InformationFunction`).
 */
private[eqdelete] sealed trait EqDeleteProcedure {
  def name: String
  def description: String
  def parameters: Seq[ProcedureParameter]
  def output: StructType
  def call(session: SparkSession, arguments: ProcedureArguments): Seq[InternalRow]

  final def call(session: SparkSession, row: InternalRow): Seq[InternalRow] =
    call(session, new ProcedureArguments(name, parameters, row))
}

private[eqdelete] object EqDeleteProcedure {
  val namespace: Seq[String] = Seq("system")
  val all: Seq[EqDeleteProcedure] = Seq(ResolveProcedure, MaintainProcedure, WriteEqualityDeletesProcedure)

  def named(name: String): Option[EqDeleteProcedure] = all.find(_.name.equalsIgnoreCase(name))

  def unknown(catalog: String, path: Seq[String]): IllegalArgumentException =
    new IllegalArgumentException(s"eqdelete: no procedure ${path.mkString(".")} in catalog $catalog; it has " +
      all.map(p => (namespace :+ p.name).mkString(".")).mkString(", "))
}

/** `resolve_equality_deletes(table, where, dry_run)`: one row, the run's result. */
private[eqdelete] object ResolveProcedure extends EqDeleteProcedure {
  override val name = "resolve_equality_deletes"
  override val description =
    "turns a table's equality deletes into position deletes (format v2) or deletion vectors (v3) and removes them, in one commit"
  override val parameters = Seq(
    ProcedureParameter("table", StringType, required = true),
    ProcedureParameter("where", StringType, required = false),
    ProcedureParameter("dry_run", BooleanType, required = false))

  val rows: SqlRows = SqlRows(ResolveEqualityDeletes.Result.Fields, nullable = ResolveEqualityDeletes.Result.Nullable)
  override def output: StructType = rows.schema

  override def call(session: SparkSession, arguments: ProcedureArguments): Seq[InternalRow] = {
    val result = ResolveEqualityDeletes.run(session, arguments.requiredString("table"), arguments.string("where").orNull,
      arguments.boolean("dry_run", default = false))
    Seq(rows.row(result.asJava.asScala.toMap))
  }
}

/**
 * `maintain(table)`: one round of keeping a live table resolved (see `MaintainRound`; the
 * spark.eqdelete.maintain.* settings apply), one row, the round's result.
 */
private[eqdelete] object MaintainProcedure extends EqDeleteProcedure {
  override val name = "maintain"
  override val description =
    "one round of keeping a table resolved while its writer commits: resolves its live equality deletes, retrying " +
      "after conflicts, compacts piled-up position delete files, and reports the lag"
  override val parameters = Seq(ProcedureParameter("table", StringType, required = true))

  val rows: SqlRows = SqlRows(RoundResult.Fields, nullable = RoundResult.Nullable)
  override def output: StructType = rows.schema

  override def call(session: SparkSession, arguments: ProcedureArguments): Seq[InternalRow] =
    Seq(rows.row(MaintainRound.run(session, arguments.requiredString("table")).asJava.asScala.toMap))
}

/**
 * `write_equality_deletes(table, key_columns, deletes, inserts, global_deletes, files_per_partition)`:
 * commits equality deletes on `key_columns` whose rows are the result of the query `deletes`, and
 * the rows of the query `inserts`, in one snapshot (what Python's `write_equality_deletes` does).
 */
private[eqdelete] object WriteEqualityDeletesProcedure extends EqDeleteProcedure {
  override val name = "write_equality_deletes"
  override val description =
    "commits equality deletes on key_columns (the rows of the query deletes) and the rows of the query inserts in one snapshot"
  override val parameters = Seq(
    ProcedureParameter("table", StringType, required = true),
    ProcedureParameter("key_columns", ArrayType(StringType, containsNull = true), required = true),
    ProcedureParameter("deletes", StringType, required = false),
    ProcedureParameter("inserts", StringType, required = false),
    ProcedureParameter("global_deletes", BooleanType, required = false),
    ProcedureParameter("files_per_partition", IntegerType, required = false))

  val rows: SqlRows = SqlRows(Seq("snapshot_id" -> LongType, "data_files" -> IntegerType, "delete_files" -> IntegerType))
  override def output: StructType = rows.schema

  override def call(session: SparkSession, arguments: ProcedureArguments): Seq[InternalRow] = {
    val table = arguments.requiredString("table")
    val keys = arguments.strings("key_columns")
    if (keys.isEmpty) throw new IllegalArgumentException(s"eqdelete: $name needs key_columns, at least one column")
    val filesPerPartition = arguments.int("files_per_partition")
    filesPerPartition.filter(_ < 1).foreach { n =>
      throw new IllegalArgumentException(s"eqdelete: files_per_partition must be at least 1, not $n")
    }
    val deletes = arguments.string("deletes").map(session.sql).map(df => filesPerPartition.fold(df)(df.repartition))
    val inserts = arguments.string("inserts").map(session.sql)
    if (deletes.isEmpty && inserts.isEmpty) {
      throw new IllegalArgumentException(s"eqdelete: $name needs deletes or inserts, a query giving the rows")
    }
    val result = EqualityDeleteWriter.commit(session, table, keys.asJava, deletes.orNull, inserts.orNull,
      arguments.boolean("global_deletes", default = false))
    Seq(rows.row(Map("snapshot_id" -> result.snapshotId, "data_files" -> result.dataFiles, "delete_files" -> result.deleteFiles)))
  }
}
