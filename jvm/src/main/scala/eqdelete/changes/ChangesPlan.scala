package eqdelete.changes

import scala.jdk.CollectionConverters._

import org.apache.iceberg.{Schema, Snapshot, Table}
import org.apache.spark.sql.{functions => F, Column, DataFrame, Row, SparkSession}
import org.apache.spark.sql.eqdelete.compat.{IcebergSparkTables, SparkShim}
import org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation
import org.apache.spark.sql.expressions.Window
import org.apache.spark.sql.types.{ArrayType, DataType, IntegerType, LongType, MapType, StringType, StructField, StructType}

/**
 * What one snapshot's changes read: the files of its parent it touched, and those it added; with
 * `byKeys`, the equality deletes that alone change the touched files, and `everyParentFile`
 * when those are all of its parent's files (SnapshotChangeFiles); `whole` when these are all of
 * its files (a stream may read a large snapshot in parts).
 */
final case class SnapshotWork(snapshot: Snapshot, ordinal: Int, touched: Set[String], added: Set[String],
    byKeys: Option[SnapshotEqualityDeletes] = None, whole: Boolean = false, everyParentFile: Boolean = false) {
  /** Whether a read of its parent's rows of `touched` reads the parent whole. */
  def readsWholeParent: Boolean = whole && everyParentFile
}

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
 * Iceberg's own reader is not, and cost what the rule's strategies cost. A snapshot whose equality
 * deletes alone change the touched files has its reads kept to the rows of its delete keys
 * (SnapshotDeleteKeys), and when those are exactly its deleted rows, no read after it; a run of
 * such snapshots is read once (KeyedRuns).
 *
 * The reads of every snapshot of a range are one plan: the snapshots' sides are unioned, each row
 * tagged with its snapshot's ordinal, and the position join and the carry-over pairing each run
 * once over all of them, keyed by the ordinal. So a range costs its reads and a fixed number of
 * shuffles, not a join and two shuffles more for every snapshot it holds.
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
    // Every snapshot's rows in the schema of the range's end, matched by field id at every depth
    // (ByFieldId): a field renamed or moved since keeps its values, one added since is NULL before.
    val target = range.snapshots.lastOption.map(schemaOf(table, _)).getOrElse(table.schema())
    requireComparable(table, target)
    val work = range.snapshots.zipWithIndex.flatMap { case (snapshot, ordinal) =>
      val files = SnapshotChangeFiles.of(table, snapshot)
      if (files.unchanged.isDefined) None
      else Some(SnapshotWork(snapshot, ordinal, files.touched, files.added, files.byKeys, whole = true, files.everyParentFile))
    }
    val changes = changesOf(session, table, target, work)
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

  /**
   * Fails in one line when a column of `target` has the name of a column the changes add (Spark
   * matches names case-insensitively), or holds a VARIANT: dropping carry-over rows compares whole
   * rows.
   */
  def requireComparable(table: Table, target: Schema): Unit = {
    val added = Set(ChangeType, ChangeOrdinal, CommitSnapshotId)
    target.columns().asScala.map(_.name()).find(c => added.contains(c.toLowerCase(java.util.Locale.ROOT))).foreach { column =>
      throw new IllegalArgumentException(s"eqdelete: cannot read the changes of ${table.name()}: its column $column has " +
        s"the name of a column the changes add (${added.toSeq.sorted.mkString(", ")}); rename it first")
    }
    IcebergSparkTables.sparkSchema(target).fields.find(f => incomparable(f.dataType)).foreach { column =>
      throw new IllegalArgumentException(s"eqdelete: cannot read the changes of ${table.name()}: column ${column.name} " +
        s"holds a VARIANT (or one inside it), and dropping carry-over rows compares whole rows, which Spark cannot do for variants")
    }
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
   * The changes each of `work` makes to the rows of its `touched` files (files of its parent) and
   * of its `added` files, tagged with its ordinal: all of its changes when they are all of its
   * files (SnapshotChangeFiles). One plan for all of them (see above).
   */
  def changesOf(session: SparkSession, table: Table, target: Schema, work: Seq[SnapshotWork],
      stateRoot: Option[String] = None): DataFrame = {
    val positions = Seq("_file", "_pos")
    def parentOf(w: SnapshotWork) = Option(w.snapshot.parentId()).map(_.longValue()).filter(_ => w.touched.nonEmpty)
    val keyed = work.flatMap(w => parentOf(w).map { p =>
      val parentSchema = schemaOf(table, table.snapshot(p))
      (w, p, parentSchema, SnapshotDeleteKeys.of(session, table, w, parentSchema))
    })
    def readAligned(snapshotId: Long, files: Set[String], schema: Schema, whole: Boolean) =
      ByFieldId.aligned(liveRows(session, table, snapshotId, files, whole), schema, target, positions)
    val exact = keyed.collect { case (w, _, _, Some(k)) if k.exact => (w, k) }
    // Snapshots whose deletes are their keys' rows: looked up in kept row images, when the session keeps them.
    val fromImages = KeptRowImages.deleted(session, table, exact, stateRoot)
    val imaged = fromImages.fold(Set.empty[Int])(_.ordinals)
    val deletedByImages = fromImages.map { found =>
      ByFieldId.aligned(found.rows, found.schema, target, Seq(KeptRowImages.At))
        .withColumn(ChangeOrdinal, F.col(KeptRowImages.At))
        .withColumn(CommitSnapshotId, commitSnapshotIdAt(work.filter(w => imaged(w.ordinal)), F.col(KeptRowImages.At)))
        .drop(KeptRowImages.At)
    }
    // Consecutive others: one read for all of them.
    val runs = KeyedRuns.of(exact.filterNot(e => imaged(e._1.ordinal)), target).filter(_.size > 1)
    val foundByKeys = runs.flatten.map(_._1.ordinal).toSet ++ imaged
    val deletedByKeys = runs.map(run => KeyedRuns.deleted(table, target, run, readAligned)) ++ deletedByImages
    val touched = keyed.filterNot(k => foundByKeys(k._1.ordinal)).map { case (w, parentId, parentSchema, keys) =>
      def read(snapshotId: Long, schema: Schema, whole: Boolean) =
        keys.foldLeft(liveRows(session, table, snapshotId, w.touched, whole))((rows, k) => k.candidates(schema, rows))
      val before = tagged(ByFieldId.aligned(read(parentId, parentSchema, w.readsWholeParent), parentSchema, target, positions),
        w.ordinal, w.snapshot)
      // The rows live before and not after, unless the candidates are exactly those.
      val after = if (keys.exists(_.exact)) None else Some(read(w.snapshot.snapshotId(), schemaOf(table, w.snapshot), whole = false)
        .select(F.lit(w.ordinal).as("_after_ordinal"), F.col("_file").as("_after_file"), F.col("_pos").as("_after_pos")))
      (before, after)
    }
    val (byPosition, byKeysAlone) = touched.partition(_._2.isDefined)
    val deletedByPosition = byPosition.map(_._1).reduceOption(_ unionByName _).zip(byPosition.flatMap(_._2).reduceOption(_ union _))
      .map { case (b, a) =>
        b.join(a, b(ChangeOrdinal) === a("_after_ordinal") && b("_file") === a("_after_file") && b("_pos") === a("_after_pos"),
          "left_anti")
      }
    val deleted = ((deletedByPosition.toSeq ++ byKeysAlone.map(_._1)).map(_.drop(positions: _*)) ++ deletedByKeys)
      .map(_.withColumn(ChangeType, F.lit(Delete)))
    val inserted = work.filter(_.added.nonEmpty).map { w =>
      tagged(ByFieldId.aligned(liveRows(session, table, w.snapshot.snapshotId(), w.added), schemaOf(table, w.snapshot), target),
        w.ordinal, w.snapshot).withColumn(ChangeType, F.lit(Insert))
    }
    val columns = target.columns().asScala.toSeq.map(_.name())
    (deleted ++ inserted).reduceOption(_ unionByName _)
      .map(changes => inChangeColumns(withoutCarryOver(changes, columns), target))
      .getOrElse(empty(session, target))
  }

  /**
   * Carry-over dropped: within a snapshot, each row deleted and inserted identically (by its exact
   * key, ExactRows) as many times as it is both, as `EXCEPT ALL` both ways would, in one shuffle
   * for every snapshot at once.
   */
  private def withoutCarryOver(changes: DataFrame, columns: Seq[String]): DataFrame = {
    val key = "_eqdelete_row_key"
    val keyed = changes.withColumn(key, ExactRows.rowKey(changes, columns))
    val sameRow = Window.partitionBy(F.col(ChangeOrdinal), F.col(key))
    val sameRowAndKind = Window.partitionBy(F.col(ChangeOrdinal), F.col(key), F.col(ChangeType)).orderBy(F.lit(1))
    def count(kind: String) = F.count(F.when(F.col(ChangeType) === kind, 1)).over(sameRow)
    val opposite = F.when(F.col(ChangeType) === Delete, count(Insert)).otherwise(count(Delete))
    keyed.withColumn("_eqdelete_opposite", opposite).withColumn("_eqdelete_copy", F.row_number().over(sameRowAndKind))
      .where(F.col("_eqdelete_copy") > F.col("_eqdelete_opposite")).drop(key, "_eqdelete_opposite", "_eqdelete_copy")
  }

  private val changeColumns = Seq(F.col(ChangeType), F.col(ChangeOrdinal), F.col(CommitSnapshotId))

  /** The snapshot id of whichever of `works` has the ordinal in column `ordinal`. */
  private[changes] def commitSnapshotIdAt(works: Seq[SnapshotWork], ordinal: Column): Column =
    F.element_at(F.map(works.flatMap(w => Seq(F.lit(w.ordinal), F.lit(w.snapshot.snapshotId()))): _*), ordinal)

  /** The rows of `files` live at `snapshot`, each an INSERT tagged with `ordinal`: how a stream starts from a snapshot whose parent expired. */
  def liveInserts(session: SparkSession, table: Table, target: Schema, snapshot: Snapshot, ordinal: Int,
      files: Set[String]): DataFrame =
    inChangeColumns(tagged(ByFieldId.aligned(liveRows(session, table, snapshot.snapshotId(), files), schemaOf(table, snapshot), target),
      ordinal, snapshot).withColumn(ChangeType, F.lit(Insert)), target)

  private def tagged(df: DataFrame, ordinal: Int, snapshot: Snapshot): DataFrame =
    df.withColumn(ChangeOrdinal, F.lit(ordinal)).withColumn(CommitSnapshotId, F.lit(snapshot.snapshotId()))

  /** `df`'s columns in the order of `schema(target)`. */
  private def inChangeColumns(df: DataFrame, target: Schema): DataFrame =
    df.select((target.columns().asScala.toSeq.map(f => column(f.name())) ++ changeColumns): _*)

  private def incomparable(dataType: DataType): Boolean = dataType match {
    case m: MapType => incomparable(m.keyType) || incomparable(m.valueType)
    case other if other.typeName == "variant" => true  // Spark 4.x's VariantType, which 3.5 lacks
    case s: StructType => s.fields.exists(f => incomparable(f.dataType))
    case a: ArrayType => incomparable(a.elementType)
    case _ => false
  }

  /** The schema `snapshot` was written in. */
  def schemaOf(table: Table, snapshot: Snapshot): Schema =
    Option(snapshot.schemaId()).flatMap(id => Option(table.schemas().get(id))).getOrElse(table.schema())

  /**
   * The rows of `files` live at `snapshot`, with `_file` and `_pos`; none when `files` is empty.
   * `whole` when they are all of its files: then no `_file` filter, which Spark would evaluate on
   * every row, and which makes the scan read `_file` even where nothing else needs it.
   *
   * Read through `table`, the instance the changes saw the snapshot in, pinned at it, never through
   * the catalog by name: a stream's source loads its own instance, and so never touches the catalog's
   * cache the session's queries and commits go through (a reload there races them, and can leave the
   * cache holding a table older than the session's last commit). Detached (no catalog, no
   * identifier), so Spark never resolves the read again by name.
   */
  private[changes] def liveRows(session: SparkSession, table: Table, snapshot: Long, files: Set[String],
      whole: Boolean = false): DataFrame = {
    val read = pinnedRows(session, table, snapshot)
    if (files.isEmpty) read.limit(0) else if (whole) read else read.where(F.col("_file").isin(files.toSeq: _*))
  }

  /** Every row live at `snapshot`, with `_file` and `_pos`, read through `table` (see [[liveRows]]). */
  private[eqdelete] def pinnedRows(session: SparkSession, table: Table, snapshot: Long): DataFrame =
    SparkShim.dataFrame(session, DataSourceV2Relation.create(IcebergSparkTables.at(table, snapshot), None, None))
      .select(F.col("*"), F.col("_file"), F.col("_pos"))

  private def column(name: String) = F.col(quote(name))

  /** A column name or a name part as SQL reads it, quoted. */
  private[eqdelete] def quote(part: String): String = "`" + part.replace("`", "``") + "`"
}
