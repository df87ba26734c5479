package eqdelete.sql

import scala.jdk.CollectionConverters._

import eqdelete.changes.{ChangesOptions, ChangesPlan}
import eqdelete.maintain.{MaintainRound, RoundResult}
import eqdelete.resolve.ResolveEqualityDeletes
import eqdelete.sink.ApplyChanges
import eqdelete.write.EqualityDeleteWriter

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.types.{ArrayType, BooleanType, DoubleType, IntegerType, LongType, MapType, StringType, StructType}

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
  val all: Seq[EqDeleteProcedure] =
    Seq(ResolveProcedure, MaintainProcedure, WriteEqualityDeletesProcedure, CreateChangelogViewProcedure, ApplyChangesProcedure)

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

/**
 * `apply_changes(table, source, changes, keys, writer_id, batch_id)`: applies a table's changes to
 * a copy, exactly and once (`ApplyChanges`): those of `source` since the copy was last brought up
 * to it, or the rows of the query `changes` (the changes of a table, as `eqdelete_changes` gives
 * them), marked with `writer_id` and `batch_id` when given. One row: what it did.
 */
private[eqdelete] object ApplyChangesProcedure extends EqDeleteProcedure {
  override val name = "apply_changes"
  override val description =
    "applies a table's changes to a copy in one commit, rows matched whole and counted, once: those of source since " +
      "the copy's last, or the rows of the query changes, marked with writer_id and batch_id"
  override val parameters = Seq(
    ProcedureParameter("table", StringType, required = true),
    ProcedureParameter("source", StringType, required = false),
    ProcedureParameter("changes", StringType, required = false),
    ProcedureParameter("keys", ArrayType(StringType, containsNull = true), required = false),
    ProcedureParameter("writer_id", StringType, required = false),
    ProcedureParameter("batch_id", LongType, required = false))

  val rows: SqlRows = SqlRows(ApplyChanges.Applied.Fields, nullable = ApplyChanges.Applied.Nullable)
  override def output: StructType = rows.schema

  override def call(session: SparkSession, arguments: ProcedureArguments): Seq[InternalRow] = {
    val table = arguments.requiredString("table")
    val keys = arguments.strings("keys")
    val applied = (arguments.string("source"), arguments.string("changes")) match {
      case (Some(source), None) =>
        if (arguments.string("writer_id").isDefined || arguments.long("batch_id").isDefined) {
          throw new IllegalArgumentException(s"eqdelete: $name with source marks the source's snapshot itself: " +
            "give writer_id and batch_id only with changes")
        }
        ApplyChanges.fromSource(session, source, table, keys)
      case (None, Some(query)) =>
        ApplyChanges.batch(session, session.sql(query), table, keys, arguments.string("writer_id"), arguments.long("batch_id"))
      case _ => throw new IllegalArgumentException(s"eqdelete: $name needs source (a table whose changes to apply) " +
        "or changes (a query giving them), one of the two")
    }
    Seq(rows.row(applied.asMap))
  }
}

/**
 * `create_changelog_view(table, changelog_view, options, compute_updates, identifier_columns,
 * net_changes)`: a temporary view of the table's changes (eqdelete.changes.ChangesPlan), with the
 * arguments and columns of Iceberg's procedure of that name, so that its users change only the
 * catalog they call; unlike Iceberg's, it reads tables with delete files. Changes no table, but
 * makes a view, as Iceberg's does. One row: the view's name (`<table>_changes` by default).
 */
private[eqdelete] object CreateChangelogViewProcedure extends EqDeleteProcedure {
  override val name = "create_changelog_view"
  override val description =
    "makes a temporary view of the rows each snapshot of a range inserted and deleted (docs/changes.md), as Iceberg's " +
      "create_changelog_view does, also for tables with equality or position deletes"
  override val parameters = Seq(
    ProcedureParameter("table", StringType, required = true),
    ProcedureParameter("changelog_view", StringType, required = false),
    ProcedureParameter("options", MapType(StringType, StringType, valueContainsNull = true), required = false),
    ProcedureParameter("compute_updates", BooleanType, required = false),
    ProcedureParameter("identifier_columns", ArrayType(StringType, containsNull = true), required = false),
    ProcedureParameter("net_changes", BooleanType, required = false))

  val rows: SqlRows = SqlRows(Seq("changelog_view" -> StringType))
  override def output: StructType = rows.schema

  override def call(session: SparkSession, arguments: ProcedureArguments): Seq[InternalRow] = {
    val table = arguments.requiredString("table")
    val supplied = arguments.stringMap("options")
    Seq(ChangesOptions.ComputeUpdates, ChangesOptions.IdentifierColumns, ChangesOptions.NetChanges)
      .filter(key => supplied.keySet.exists(_.equalsIgnoreCase(key))).foreach { key =>
        throw new IllegalArgumentException(s"eqdelete: $name takes $key as an argument, not in options")
      }
    val options = ChangesOptions.parse(supplied).copy(
      computeUpdates = arguments.boolean("compute_updates", default = false),
      identifierColumns = Some(arguments.strings("identifier_columns")).filter(_.nonEmpty),
      netChanges = arguments.boolean("net_changes", default = false))
    val view = arguments.string("changelog_view").filter(_.trim.nonEmpty)
      .getOrElse(session.sessionState.sqlParser.parseMultipartIdentifier(table).last + "_changes")
    ChangesPlan.of(session, table, options).createOrReplaceTempView(view)
    Seq(rows.row(Map("changelog_view" -> view)))
  }
}
