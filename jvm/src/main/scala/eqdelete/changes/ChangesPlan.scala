package eqdelete.changes

import scala.jdk.CollectionConverters._

import org.apache.iceberg.{Schema, Snapshot, Table}
import org.apache.spark.sql.{functions => F, DataFrame, Row, SparkSession}
import org.apache.spark.sql.expressions.Window
import org.apache.spark.sql.eqdelete.compat.IcebergSparkTables
import org.apache.spark.sql.types.{ArrayType, DataType, IntegerType, LongType, MapType, StringType, StructField, StructType}

/**
 * The changes of a table over a range of snapshots, as rows: each snapshot's inserted and
 * deleted rows, in the columns of Iceberg's changelog view (`_change_type`, `_change_ordinal`,
 * `_commit_snapshot_id` after the table's own). docs/changes.md gives the semantics.
 *
 * A snapshot's changes are the difference between its live rows and its parent's, found by
 * position: inserts are the live rows of the data files it added; deletes are the rows of the
 * files it touched (SnapshotChangeFiles) that are live in its parent and not in it, by `_file`
 * and `_pos`, which covers every way a row goes: an equality delete (only rows still live in the
 * parent, by Iceberg's sequence numbers), a position delete or a deletion vector (only the
 * positions it adds), a removed data file. Rows deleted and inserted identically by one snapshot
 * (carry-over, as a copy-on-write rewrite makes) are dropped in pairs. Both sides are time-travel
 * reads of the table, which eqdelete's rule rewrites like any other: they are right where
 * Iceberg's own reader is not, and cost what the rule's strategies cost.
 */
object ChangesPlan {
  val ChangeType = "_change_type"
  val ChangeOrdinal = "_change_ordinal"
  val CommitSnapshotId = "_commit_snapshot_id"
  val Insert = "INSERT"
  val Delete = "DELETE"

  val UpdateBefore = "UPDATE_BEFORE"
  val UpdateAfter = "UPDATE_AFTER"

  /**
   * The changes of `tableName` over the range `options` give (all of its history by default): each
   * snapshot's, or with `net_changes` the net change of the whole range (each row as often as it
   * was inserted more than deleted, or the other way, tagged with its last change); with
   * `compute_updates`, a snapshot's DELETE and INSERT of one identifier become UPDATE_BEFORE and
   * UPDATE_AFTER.
   */
  def of(session: SparkSession, tableName: String, options: ChangesOptions): DataFrame = {
    val table = IcebergSparkTables.current(session, tableName)
    val range = ChangeRange.of(table, options)
    // Every snapshot's rows in the schema of the range's end, columns matched by field id: a
    // column renamed since keeps its values, one added since is NULL before.
    val target = range.snapshots.lastOption.map(schemaOf(table, _)).getOrElse(table.schema())
    requireComparable(table, target)
    val name = quotedName(session, tableName)
    val perSnapshot = range.snapshots.zipWithIndex.flatMap { case (snapshot, ordinal) =>
      val files = SnapshotChangeFiles.of(table, snapshot)
      if (files.unchanged.isDefined) None
      else Some(snapshotChanges(session, name, table, target, snapshot, ordinal, files.touched, files.added))
    }
    val changes = perSnapshot.reduceOption(_ unionByName _).getOrElse(empty(session, target))
    val columns = target.columns().asScala.toSeq.map(_.name())
    if (options.netChanges) net(changes, columns)
    else if (options.computeUpdates) updates(changes, identifierColumns(table, target, options))
    else changes
  }

  /** The columns of a table's changes in schema `target`: its own, then `_change_type`, `_change_ordinal`, `_commit_snapshot_id`. */
  def schema(target: Schema): StructType = StructType(IcebergSparkTables.sparkSchema(target).fields ++ changeFields)

  /** No changes, in the columns of `target`. */
  def empty(session: SparkSession, target: Schema): DataFrame =
    session.createDataFrame(session.sparkContext.emptyRDD[Row], schema(target))

  /** Fails in one line when a row of `target` holds a MAP or a VARIANT: dropping carry-over rows compares whole rows. */
  def requireComparable(table: Table, target: Schema): Unit =
    IcebergSparkTables.sparkSchema(target).fields.find(f => incomparable(f.dataType)).foreach { column =>
      throw new IllegalArgumentException(s"eqdelete: cannot read the changes of ${table.name()}: column ${column.name} " +
        s"holds a ${column.dataType.simpleString.toUpperCase(java.util.Locale.ROOT).takeWhile(_ != '<')} (or one inside it), " +
        "and dropping carry-over rows compares whole rows, which Spark cannot do for maps and variants")
    }

  /**
   * The columns `compute_updates` pairs by: `identifier_columns`, or the table's identifier
   * fields now (setting them makes no snapshot), named as in `target`.
   */
  def identifierColumns(table: Table, target: Schema, options: ChangesOptions): Seq[String] = {
    val columns = target.columns().asScala.toSeq.map(_.name())
    val ids = options.identifierColumns.getOrElse(
      table.schema().identifierFieldIds().asScala.toSeq.flatMap(id => Option(target.findColumnName(id))).sorted)
    if (ids.isEmpty) {
      throw new IllegalArgumentException(s"eqdelete: compute_updates pairs a snapshot's deletes and inserts by identifier " +
        s"columns, and ${table.name()} has none: give identifier_columns")
    }
    ids.filterNot(columns.contains).foreach { id =>
      throw new IllegalArgumentException(s"eqdelete: identifier column $id is not a column of ${table.name()} " +
        s"(${columns.mkString(", ")})")
    }
    ids
  }

  /** A snapshot's one DELETE and one INSERT of the same identifier, as UPDATE_BEFORE and UPDATE_AFTER. */
  def updates(changes: DataFrame, ids: Seq[String]): DataFrame = {
    val sameRow = Window.partitionBy((F.col(ChangeOrdinal) +: ids.map(id => ExactRows.key(column(id), changes.select(column(id)).schema.head.dataType))): _*)
    def count(kind: String) = F.count(F.when(F.col(ChangeType) === kind, 1)).over(sameRow)
    val paired = count(Delete) === 1 && count(Insert) === 1
    changes.withColumn(ChangeType, F.when(paired,
      F.when(F.col(ChangeType) === Delete, UpdateBefore).otherwise(UpdateAfter)).otherwise(F.col(ChangeType)))
  }

  /**
   * The net change of each row over the range: inserts less deletes, that many times, tagged with
   * its last change. Rows are grouped by their exact key (ExactRows), so their values come out as
   * they were.
   */
  private def net(changes: DataFrame, columns: Seq[String]): DataFrame = {
    val data = columns.map(column)
    changes.groupBy(ExactRows.rowKey(changes, columns).as("_key"))
      .agg(F.first(F.struct(data: _*)).as("_row"), F.sum(F.when(F.col(ChangeType) === Insert, 1).otherwise(-1)).as("_net"),
        F.max(F.struct(F.col(ChangeOrdinal), F.col(CommitSnapshotId))).as("_last"))
      .where(F.col("_net") =!= 0)
      .withColumn("_copy", F.explode(F.array_repeat(F.lit(1), F.abs(F.col("_net")).cast(IntegerType))))
      .select(columns.map(c => F.col("_row").getField(c).as(c)) ++ Seq(F.when(F.col("_net") > 0, Insert).otherwise(Delete).as(ChangeType),
        F.col(s"_last.$ChangeOrdinal").as(ChangeOrdinal), F.col(s"_last.$CommitSnapshotId").as(CommitSnapshotId)): _*)
  }

  private val changeFields = Seq(StructField(ChangeType, StringType, nullable = false),
    StructField(ChangeOrdinal, IntegerType, nullable = false), StructField(CommitSnapshotId, LongType, nullable = false))

  /**
   * The changes `snapshot` makes to the rows of `touched` (files of its parent) and of `added` (files
   * it added), tagged with `ordinal`: all of its changes when they are all of its files
   * (SnapshotChangeFiles). `name` is the table's name, quoted.
   */
  def snapshotChanges(session: SparkSession, name: String, table: Table, target: Schema, snapshot: Snapshot,
      ordinal: Int, touched: Set[String], added: Set[String]): DataFrame = {
    def rows(at: Long, of: Set[String]): DataFrame = liveRows(session, name, at, of)
    val parent = Option(snapshot.parentId()).map(_.longValue())
    val deleted = parent.filter(_ => touched.nonEmpty).map { parentId =>
      val before = rows(parentId, touched)
      val after = rows(snapshot.snapshotId(), touched).select(F.col("_file").as("_after_file"), F.col("_pos").as("_after_pos"))
      val gone = before.join(after, before("_file") === after("_after_file") && before("_pos") === after("_after_pos"), "left_anti")
      aligned(gone, schemaOf(table, table.snapshot(parentId)), target)
    }
    val ins = aligned(rows(snapshot.snapshotId(), added), schemaOf(table, snapshot), target)
    val dels = deleted.getOrElse(ins.limit(0))
    // Carry-over: what the snapshot deleted and inserted identically is no change.
    tagged(ExactRows.exceptAll(dels, ins), Delete, ordinal, snapshot)
      .unionByName(tagged(ExactRows.exceptAll(ins, dels), Insert, ordinal, snapshot))
  }

  /** The rows of `files` live at `snapshot`, each an INSERT tagged with `ordinal`: how a stream starts from a snapshot whose parent expired. */
  def liveInserts(session: SparkSession, name: String, table: Table, target: Schema, snapshot: Snapshot, ordinal: Int,
      files: Set[String]): DataFrame =
    tagged(aligned(liveRows(session, name, snapshot.snapshotId(), files), schemaOf(table, snapshot), target), Insert,
      ordinal, snapshot)

  private def tagged(df: DataFrame, kind: String, ordinal: Int, snapshot: Snapshot): DataFrame = df.select(F.col("*"),
    F.lit(kind).as(ChangeType), F.lit(ordinal).as(ChangeOrdinal), F.lit(snapshot.snapshotId()).as(CommitSnapshotId))

  /** `df`, read in schema `read`, as the columns of `target`, matched by field id (NULL where `read` has none). */
  private def aligned(df: DataFrame, read: Schema, target: Schema): DataFrame = {
    val targetType = IcebergSparkTables.sparkSchema(target)
    df.select(target.columns().asScala.toSeq.map { field =>
      val sparkType = targetType(field.name()).dataType
      read.columns().asScala.find(_.fieldId() == field.fieldId())
        .map(f => column(f.name()).cast(sparkType)).getOrElse(F.lit(null).cast(sparkType)).as(field.name())
    }: _*)
  }

  private def incomparable(dataType: DataType): Boolean = dataType match {
    case _: MapType => true
    case other if other.typeName == "variant" => true  // Spark 4.x's VariantType, which 3.5 lacks
    case s: StructType => s.fields.exists(f => incomparable(f.dataType))
    case a: ArrayType => incomparable(a.elementType)
    case _ => false
  }

  /** The schema `snapshot` was written in. */
  def schemaOf(table: Table, snapshot: Snapshot): Schema =
    Option(snapshot.schemaId()).flatMap(id => Option(table.schemas().get(id))).getOrElse(table.schema())

  /** The rows of `files` live at `snapshot`, with `_file` and `_pos`; none when `files` is empty. */
  private def liveRows(session: SparkSession, name: String, snapshot: Long, files: Set[String]): DataFrame = {
    val read = session.sql(s"SELECT *, _file, _pos FROM $name VERSION AS OF $snapshot")
    if (files.isEmpty) read.limit(0) else read.where(F.col("_file").isin(files.toSeq: _*))
  }

  private def column(name: String) = F.col(quote(name))

  /** A table's name as SQL reads it, each part quoted. */
  def quotedName(session: SparkSession, tableName: String): String =
    session.sessionState.sqlParser.parseMultipartIdentifier(tableName).map(quote).mkString(".")

  /** A column name or a name part as SQL reads it, quoted. */
  private[changes] def quote(part: String): String = "`" + part.replace("`", "``") + "`"
}
