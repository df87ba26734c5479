package eqdelete.sink

import scala.jdk.CollectionConverters._
import scala.util.control.NonFatal

import eqdelete.changes.{ByFieldId, ChangeRange, ChangesOptions, ChangesPlan, ExactRows}
import eqdelete.commit.{CommitOutcome, CommitOutcomeUnknownException, Failures, GuardedCommit}
import eqdelete.resolve.{PositionDeleteWriting, TargetFile, WrittenDeletes}
import eqdelete.write.{EqualityDeleteWriter, TaskWrittenFiles}

import org.apache.iceberg.{DataFile, FileContent, Table}
import org.apache.iceberg.expressions.Expressions
import org.apache.iceberg.types.Type.TypeID
import org.apache.spark.internal.Logging
import org.apache.spark.sql.{functions => F, sources, Column, DataFrame, SparkSession}
import org.apache.spark.sql.eqdelete.compat.{IcebergInternals, IcebergSparkTables}
import org.apache.spark.sql.expressions.Window
import org.apache.spark.sql.types.{ArrayType, DataType, DoubleType, FloatType, IntegerType, LongType, MapType,
  StructType}

/**
 * Applies a table's changes (rows in the columns `eqdelete.changes` gives) to a copy, an Iceberg
 * table, exactly and once, as Delta's `APPLY CHANGES INTO` does for its tables:
 *
 *  - Rows are matched whole, not by key, and counted: an INSERT or UPDATE_AFTER adds one copy of
 *    its row, a DELETE or UPDATE_BEFORE removes one. So NULL keys, a key live twice (two appends)
 *    and updates whose two images tie in order all come out as the source's rows, and the order
 *    of the rows within the changes does not matter. Rows are compared exactly (ExactRows: -0.0
 *    is not 0.0). `keys`, when given, only narrow the copy's read (by their range, and their values when few).
 *  - One commit: the rows removed as position deletes (deletion vectors in format v3) of the rows
 *    found in the copy, the rows added as new data files, and a mark of what was applied in the
 *    snapshot's summary. A stream's batch is marked by its writer id and batch id, as Delta's
 *    `txnAppId`/`txnVersion`; `fromSource` by the source's last snapshot applied. A batch already
 *    marked on the copy's lineage is skipped, so a batch replayed after a crash changes nothing.
 *  - A DELETE of a row the copy does not hold fails, naming the row: the copy was not the source
 *    where the changes start, and nothing is written.
 *  - The commit is validated from the snapshot read (no data file added or removed since, no
 *    delete on the rows found): a concurrent writer makes it try again, from the mark on.
 */
object ApplyChanges extends Logging {

  /** The snapshot summary key prefix of the marks: `eqdelete.applied.<writer id>` holds the last batch id. */
  val MarkPrefix = "eqdelete.applied."

  /** What one application did: the snapshot it committed, or why it committed none. */
  final case class Applied(snapshotId: Option[Long], rowsDeleted: Long, rowsInserted: Long, skipped: Option[String]) {
    def asMap: Map[String, Any] =
      Map("snapshot_id" -> snapshotId, "rows_deleted" -> rowsDeleted, "rows_inserted" -> rowsInserted, "skipped" -> skipped)
  }

  object Applied {
    val Fields: Seq[(String, DataType)] = Seq("snapshot_id" -> LongType, "rows_deleted" -> LongType,
      "rows_inserted" -> LongType, "skipped" -> org.apache.spark.sql.types.StringType)
    val Nullable: Set[String] = Set("snapshot_id", "skipped")
  }

  private val Tries = 3

  /**
   * Applies `changes` (a micro-batch of `eqdelete.changes_stream`, or any read of `eqdelete.changes`)
   * to `tableName`. With `writerId` and `batchId`, once: a batch id at or below the last one marked
   * for the writer on the copy's lineage is skipped.
   */
  def batch(session: SparkSession, changes: DataFrame, tableName: String, keys: Seq[String], writerId: Option[String],
      batchId: Option[Long]): Applied = {
    require(writerId.isDefined == batchId.isDefined, "eqdelete: apply_changes takes writer_id and batch_id together (a " +
      "stream's query name and foreachBatch's batch id), or neither")
    writerId.filter(_.trim.isEmpty).foreach(_ => throw new IllegalArgumentException("eqdelete: writer_id must not be blank"))
    val mark = for (w <- writerId; b <- batchId) yield (MarkPrefix + w.trim, b)
    applying(session, tableName) { table =>
      mark.flatMap { case (key, id) =>
        lastMark(table, key).map(_.toLong).filter(_ >= id).map { last =>
          if (id == last) s"batch $id of writer ${writerId.get} is applied"
          else {
            // A stream replays only its last batch: an older one is a new checkpoint's, whose
            // batch ids start again at 0, under a writer id an earlier query used.
            val why = s"batch $id of writer ${writerId.get} is at or below batch $last, applied already; a stream " +
              "started on a new checkpoint numbers its batches from 0 again and would skip them up to there: rebuild " +
              "the copy under a new writer_id"
            logWarning(s"eqdelete: applying to $tableName: $why")
            why
          }
        }
      }.map(Left(_)).getOrElse(Right((changes, mark.map { case (k, id) => k -> id.toString })))
    } (keys, markAlone = false)
  }

  /**
   * Brings `tableName` up to `source`'s current snapshot: the changes since the source snapshot
   * marked on it last (all of the source's history the first time, for an empty copy) applied as
   * one commit, marked with the snapshot reached. Up to date, nothing.
   */
  def fromSource(session: SparkSession, source: String, tableName: String, keys: Seq[String]): Applied = {
    val sourceTable = IcebergSparkTables.current(session, source)
    val key = MarkPrefix + "source." + sourceTable.uuid()
    applying(session, tableName) { table =>
      val from = lastMark(table, key).map(_.toLong)
      if (from.isEmpty && !session.table(tableName).isEmpty) {
        throw new IllegalArgumentException(s"eqdelete: $tableName holds rows and no mark of $source ($key): the first " +
          s"apply_changes from a source needs an empty copy, which it fills with all of the source's changes")
      }
      Option(sourceTable.currentSnapshot()).map(_.snapshotId()) match {
        case None => Left(s"$source has no snapshot")
        case Some(end) if from.contains(end) => Left(s"the copy is at snapshot $end of $source, its current one")
        case Some(end) =>
          Right((ChangesPlan.of(session, source, ChangesOptions(startSnapshotId = from, endSnapshotId = Some(end))),
            Some(key -> end.toString)))
      }
    } (keys, markAlone = true)
  }

  /**
   * Reads the copy, asks `plan` what to apply (or why nothing), writes and commits it; again from
   * the start when the commit conflicts with another writer's. `markAlone`: changes that cancel out
   * still commit their mark (a snapshot with no files), so the next apply starts after them.
   */
  private def applying(session: SparkSession, tableName: String)(plan: Table => Either[String, (DataFrame, Option[(String, String)])])(
      keys: Seq[String], markAlone: Boolean): Applied = {
    var attempt = 1
    var result: Option[Applied] = None
    while (result.isEmpty) {
      val table = IcebergSparkTables.current(session, tableName)
      result = plan(table) match {
        case Left(why) => Some(Applied(None, 0, 0, Some(why)))
        case Right((changes, mark)) =>
          try Some(once(session, tableName, table, changes, keys, mark, markAlone)) catch {
            case conflict: ApplyConflictException if attempt < Tries =>
              logInfo(s"eqdelete: applying changes to $tableName conflicted with another commit (${conflict.getMessage}); " +
                s"again, try ${attempt + 1} of $Tries")
              attempt += 1
              None
            case conflict: ApplyConflictException =>
              throw new ApplyConflictException(s"eqdelete: applying changes to $tableName conflicted with other commits " +
                s"$Tries times, the last: ${conflict.getMessage.take(300)}. Nothing was committed and the files written were " +
                "deleted; apply them again", conflict)
          }
      }
    }
    result.get
  }

  private def once(session: SparkSession, tableName: String, table: Table, changes: DataFrame, keys: Seq[String],
      mark: Option[(String, String)], markAlone: Boolean): Applied = {
    val columns = dataColumns(changes, tableName)
    val copyColumns = table.schema().columns().asScala.map(_.name()).toSeq
    checkColumns(session, table, tableName, changes, columns, copyColumns, keys)
    // Each row's net count: added less removed.
    val sign = F.when(F.col(ChangesPlan.ChangeType).isin(ChangesPlan.Insert, ChangesPlan.UpdateAfter), 1)
      .when(F.col(ChangesPlan.ChangeType).isin(ChangesPlan.Delete, ChangesPlan.UpdateBefore), -1)
      .otherwise(F.raise_error(F.concat(F.lit("eqdelete: apply_changes cannot apply a change of type "),
        F.coalesce(F.col(ChangesPlan.ChangeType), F.lit("NULL")))).cast(IntegerType))
    val cached = BatchTasks.cachedAsShuffled(changes.groupBy(ExactRows.rowKey(changes, columns).as(Key))
      .agg(F.first(F.struct(columns.map(quoted): _*)).as(Row), F.sum(sign).as(Net))
      .where(F.col(Net) =!= 0))
    try {
      // In the same job, each key's bounds among the rows removed (which `keys` narrow the copy's read by),
      // and whether a row added is NULL in a column the copy requires (a job of its own only then).
      val required = requiredColumns(table, changes, columns)
      val nullRequired = required.map(c => F.col(s"$Row.${quote(c)}").isNull).reduceOption(_ || _)
      val counts = cached.agg(F.count(F.lit(1)), Seq(F.coalesce(F.sum(F.when(F.col(Net) < 0, -F.col(Net))), F.lit(0L)),
        F.coalesce(F.sum(F.when(F.col(Net) > 0, F.col(Net))), F.lit(0L))) ++ KeyBounds.columns(keys, F.col(Net) < 0) ++
        nullRequired.map(isNull => F.max(F.when(F.col(Net) > 0 && isNull, 1))): _*).head()
      val (wanted, adding) = (counts.getLong(1), counts.getLong(2))
      // Read in tasks sized to its rows from here on (Spark 3.5 caches all spark.sql.shuffle.partitions).
      val net = cached.coalesce(BatchTasks.forRows(counts.getLong(0), session))
      if (nullRequired.isDefined && !counts.isNullAt(3 + 3 * keys.size)) refuseNullRequired(tableName, required, net.where(F.col(Net) > 0))
      val snapshot = Option(table.currentSnapshot()).map(_.snapshotId())
      val removed = net.where(F.col(Net) < 0)
      // The copy's kept rows, when the session keeps them: the rows removed are looked up, not read.
      val kept = snapshot.flatMap(s => KeptCopyRows.at(session, table, s, keys))
      val added = net.where(F.col(Net) > 0)
        .select(F.col(Row), F.explode(F.array_repeat(F.lit(true), F.col(Net).cast(IntegerType))).as("_copy"))
        .select(copyColumns.map(c => columns.find(_.equalsIgnoreCase(c)).map(d => reshaped(F.col(s"$Row.${quote(d)}"),
          changes.schema(d).dataType, copyType(table, c))).getOrElse(F.lit(null)).as(c)): _*)
      // The rows added are written beside the finding of the rows removed and the writing of their
      // position deletes, which they do not depend on: jobs of a task or two each, whose planning
      // and scheduling overlap. A data file a task, sized to the rows added: a batch's 10^4 rows in
      // one file, not one per partition of `net`.
      val addedFiles = SideJob("eqdelete-apply-changes-data-files")(
        EqualityDeleteWriter.dataFilesOf(table, added.coalesce(BatchTasks.forRows(adding, session))))
      var positions: Option[(DataFrame, Set[String])] = None
      var written = Seq.empty[WrittenDeletes]
      val dataFiles = try {
        positions = if (wanted == 0) None else Some(found(session, tableName, table, snapshot, removed, columns, keys, wanted,
          KeyBounds.of(keys, counts, 3), kept))
        written = positions.toSeq.flatMap { case (rows, files) =>
          PositionDeleteWriting.write(table, IcebergInternals.formatVersion(table), targets(table, snapshot.get, files), rows,
            Some(BatchTasks.forRows(wanted, session)))
        }
        addedFiles.result()
      } catch {
        case e: Throwable =>
          // Either side failed (a row the copy lacks, a write refused, the apply stopped): what both
          // wrote is deleted, the rows added once written; nothing is left behind.
          TaskWrittenFiles.delete(table.io(), written.flatMap(_.files).map(_.location()), "apply_changes")
          addedFiles.undoOnceDone(e)(files => TaskWrittenFiles.delete(table.io(), files.map(_.location()), "apply_changes"))
          positions.foreach(_._1.unpersist())
          throw e
      }
      val inserted = dataFiles.map(_.recordCount()).sum
      try {
        if (dataFiles.isEmpty && written.isEmpty && !(markAlone && mark.isDefined)) Applied(None, 0, 0, Some("the changes cancel out"))
        else {
          val applied = commit(session, tableName, table, snapshot, dataFiles, written, mark, wanted, inserted)
          for (held <- kept; id <- applied.snapshotId) {
            KeptCopyRows.forward(session, table, held, id, positions.map(_._1), wanted, dataFiles.map(_.location()), inserted)
          }
          applied
        }
      } finally positions.foreach(_._1.unpersist())
    } finally cached.unpersist()
  }

  /**
   * The positions in the copy (at `snapshot`) of the rows `removed` takes away, as many of each as
   * its count (cached), and the data files they are in; fails naming a row the copy holds too few of.
   */
  private def found(session: SparkSession, tableName: String, table: Table, snapshot: Option[Long], removed: DataFrame,
      columns: Seq[String], keys: Seq[String], wanted: Long, bounds: Seq[KeyBounds],
      kept: Option[KeptCopyRows.Held]): (DataFrame, Set[String]) = {
    // The copy's rows at the snapshot read, in its schema now (a column added since is NULL in them),
    // through the instance the apply commits through: never the catalog by name, which would cache
    // another instance that this apply's commit then leaves behind.
    val read = snapshot.map(s => ByFieldId.aligned(ChangesPlan.pinnedRows(session, table, s),
      ChangesPlan.schemaOf(table, table.snapshot(s)), table.schema(), Seq("_file", "_pos"))).getOrElse(session.emptyDataFrame)
    val theirs = removed.schema(Row).dataType.asInstanceOf[StructType]
    val copy = snapshot.map { s =>
      val rows = kept.map(held => KeptCopyRows.rowsOf(session, held, removed.select(keys.map(k => F.col(s"$Row.${quote(k)}").as(k)): _*)))
        .getOrElse(narrowed(table, s, read, removed, keys, wanted, bounds))
      inTheirTypes(rows, columns, theirs)
    }
    // What the kept rows name a row by, for bringing them forward after the commit.
    val named = Seq("_file", "_pos") ++ kept.map(_ => KeptCopyRows.Entry)
    val matched = copy.map { rows =>
      val keyed = rows.withColumn(Key, ExactRows.rowKey(rows, columns))
      val nth = Window.partitionBy(F.col(Key)).orderBy(F.col("_file"), F.col("_pos"))
      // The rows found are about as many as those removed: their window in tasks sized to them.
      keyed.join(F.broadcast(removed.select(F.col(Key), (-F.col(Net)).as(Net))), Seq(Key))
        .repartition(BatchTasks.forRows(wanted, session), F.col(Key))
        .withColumn("_nth", F.row_number().over(nth)).where(F.col("_nth") <= F.col(Net)).select(named.map(F.col): _*).cache()
    }
    // The rows matched and the data files they lie in, in one job over the cached rows.
    val (count, files) = try matched.map(inFiles).getOrElse((0L, Set.empty[String])) catch {
      case NonFatal(e) if kept.isDefined =>
        // The kept rows could not be looked up (a store lost with its checkpoint, say): dropped, and the copy read.
        matched.foreach(_.unpersist())
        KeptCopyRows.lookupFailed(session, table, kept.get, e)
        return found(session, tableName, table, snapshot, removed, columns, keys, wanted, bounds, None)
      case e: Throwable =>
        matched.foreach(_.unpersist())
        throw e
    }
    if (count < wanted && kept.isDefined) {
      // Refused only on a read of the copy itself: kept rows that miss one are dropped, not believed.
      matched.foreach(_.unpersist())
      KeptCopyRows.lookupFailed(session, table, kept.get, new IllegalStateException(s"they hold $count of the " +
        s"$wanted rows the changes delete"))
      return found(session, tableName, table, snapshot, removed, columns, keys, wanted, bounds, None)
    }
    if (count < wanted) {
      matched.foreach(_.unpersist())
      val held = copy.map(rows => rows.groupBy(ExactRows.rowKey(rows, columns).as(Key)).agg(F.count(F.lit(1)).as("_held")))
      val short = held.fold(removed.withColumn("_held", F.lit(0L)))(h => removed.join(h, Seq(Key), "left"))
        .where(F.coalesce(F.col("_held"), F.lit(0L)) < -F.col(Net)).select(Row).head().getStruct(0)
      throw new ApplyRefusedException(s"eqdelete: the changes delete ${wanted - count} row(s) that $tableName does not " +
        s"hold, such as ${short.mkString("(", ", ", ")")}: it is not a copy of the source where these changes start " +
        "(seed it with the source's rows at that snapshot, or apply the changes from the start); nothing was written")
    }
    val rows = matched.get
    (rows, files)
  }

  /** How many `rows` there are, and the data files (`_file`) they lie in. */
  private def inFiles(rows: DataFrame): (Long, Set[String]) =
    rows.select("_file").queryExecution.toRdd.mapPartitions { it =>
      val files = scala.collection.mutable.HashSet.empty[String]
      var n = 0L
      it.foreach { row => n += 1; files += row.getUTF8String(0).toString }
      Iterator((n, files.toSet))
    }.collect().foldLeft((0L, Set.empty[String])) { case ((n, f), (m, g)) => (n + m, f ++ g) }

  /**
   * The copy's rows kept to those whose `keys` could be one of `removed`'s, by filters Iceberg prunes
   * data files with: each key between the least and the greatest of `removed`'s values (`bounds`: a
   * copy clustered by key, as tables of growing ids are, reads only the files of the keys changed),
   * and, for up to `InLimit` rows removed (`wanted`), among their values (which finds a few keys
   * spread over the table).
   * The rows are matched exactly after, by the join: these only read fewer. So where Iceberg's
   * pruning keeps every data file of the copy at `snapshot` (keys spread over the table), the read
   * is not filtered at all: Spark would evaluate the filter on every row for nothing, and `keys`
   * would cost more than no keys. An IN of thousands of values pruned nothing (Iceberg gives up on
   * an IN past 200 values) and cost a job and its evaluation. A float or double key is not bounded:
   * NaN orders differently in Spark and Iceberg. A `uuid` key is not filtered at all: Iceberg before
   * 1.11 compares UUIDs signed and their files' bounds unsigned (apache/iceberg#14216), so its
   * pruning could skip a file holding a removed row.
   */
  private def narrowed(table: Table, snapshot: Long, read: DataFrame, removed: DataFrame, keys: Seq[String], wanted: Long,
      bounds: Seq[KeyBounds]): DataFrame =
    if (keys.isEmpty) read
    else {
      val values = keys.map(k => F.col(s"$Row.${quote(k)}"))
      // `wanted` rows removed have at most as many keys: past the limit, no job collects them.
      val few = if (wanted > InLimit) Array.empty[org.apache.spark.sql.Row]
        else removed.select(values.zip(keys).map { case (v, k) => v.as(k) }: _*).distinct().coalesce(1).collect()
      def uuid(k: String) = Option(table.schema().caseInsensitiveFindField(k)).exists(_.`type`().typeId() == TypeID.UUID)
      val kept = keys.zip(bounds).zipWithIndex.filterNot { case ((k, _), _) => uuid(k) }.flatMap { case ((k, b), i) =>
        val name = read.schema.fields.find(_.name.equalsIgnoreCase(k)).map(_.name).getOrElse(k)
        val column = F.col(quote(name))
        val attribute = filterAttribute(name)
        val bounded = read.schema(name).dataType match {
          case FloatType | DoubleType => None
          case _ => b.range.map { case (lo, hi) =>
            Narrowing(column >= F.lit(lo), sources.GreaterThanOrEqual(attribute, lo)) and
              Narrowing(column <= F.lit(hi), sources.LessThanOrEqual(attribute, hi))
          }
        }
        val among = if (wanted > InLimit) None else {
          val present = few.map(_.get(i)).filter(_ != null).distinct.toSeq
          Some(if (present.isEmpty) Narrowing(F.lit(false), sources.AlwaysFalse)
            else Narrowing(column.isin(present: _*), sources.In(attribute, present.toArray)))
        }
        Seq(bounded, among).flatten.reduceOption(_ and _).map(c => if (b.hasNull) c or Narrowing(column.isNull, sources.IsNull(attribute)) else c)
      }
      kept.reduceOption(_ and _) match {
        case Some(narrowing) if prunes(table, snapshot, kept.map(_.filter)) => read.where(narrowing.column)
        case _ => read
      }
    }

  /** A column as a `sources.Filter` names it: quoted where it is not a plain name (a dot would read as a nested field). */
  private def filterAttribute(name: String): String = if (name.matches("[A-Za-z_][A-Za-z0-9_]*")) name else quote(name)

  /** A filter of the copy's read, as Spark evaluates it and as Iceberg's planning takes it. */
  private final case class Narrowing(column: Column, filter: sources.Filter) {
    def and(other: Narrowing): Narrowing = Narrowing(column && other.column, sources.And(filter, other.filter))
    def or(other: Narrowing): Narrowing = Narrowing(column || other.column, sources.Or(filter, other.filter))
  }

  /** A key's least and greatest value among the rows removed (None: no value but NULL), and whether one is NULL. */
  private final case class KeyBounds(range: Option[(Any, Any)], hasNull: Boolean)

  private object KeyBounds {
    /** Aggregates of the rows `removing` picks: each key's least, greatest, and whether one is NULL (1). */
    def columns(keys: Seq[String], removing: Column): Seq[Column] = keys.flatMap { k =>
      val value = F.col(s"$Row.${quote(k)}")
      Seq(F.min(F.when(removing, value)), F.max(F.when(removing, value)), F.max(F.when(removing, value.isNull.cast(IntegerType))))
    }

    /** What `columns` gave, from position `from` of `row`. */
    def of(keys: Seq[String], row: org.apache.spark.sql.Row, from: Int): Seq[KeyBounds] = keys.indices.map { i =>
      val at = from + 3 * i
      KeyBounds(Option(row.get(at)).map(lo => (lo, row.get(at + 1))), !row.isNullAt(at + 2) && row.getInt(at + 2) == 1)
    }
  }

  /**
   * Whether Iceberg's planning of the copy at `snapshot` under `filters` (the keys', ANDed: those
   * Iceberg can take) leaves out a data file; metadata only. True where Iceberg takes none of them,
   * or its planning fails on them: then the filters are applied, and Spark's pushdown decides.
   */
  private def prunes(table: Table, snapshot: Long, filters: Seq[sources.Filter]): Boolean = {
    val taken = filters.flatMap(IcebergInternals.icebergFilter)
    taken.isEmpty || (try {
      val planned = scala.util.Using.resource(table.newScan().useSnapshot(snapshot).filter(taken.reduce(Expressions.and(_, _)))
        .ignoreResiduals().planFiles())(_.asScala.size)
      val all = Option(table.snapshot(snapshot).summary().get("total-data-files")).map(_.toLong).getOrElse(
        scala.util.Using.resource(table.newScan().useSnapshot(snapshot).planFiles())(_.asScala.size.toLong))
      planned < all
    } catch {
      case NonFatal(e) =>
        logWarning(s"eqdelete: apply_changes could not plan the copy's files under its keys' bounds; reading it filtered", e)
        true
    })
  }

  /** Values of an IN that Iceberg still prunes data files by (`InclusiveMetricsEvaluator`'s limit). */
  private val InLimit = 200

  /** The Spark type of the copy's column `name`. */
  private def copyType(table: Table, name: String): DataType =
    IcebergSparkTables.sparkSchema(table.schema()).fields.find(_.name.equalsIgnoreCase(name)).get.dataType

  /**
   * A value of type `from` as type `to`, where one struct holds fields the other lacks (the copy
   * migrated a step ahead by a nested field): the fields of `to`, by name, each NULL where `from`
   * lacks it, at any depth. The changes' rows so take the copy's type (NULL in its new fields, as
   * in a top-level column the changes lack), and the copy's rows theirs (its new fields left out of
   * the comparison). Other types pass as they are (a promotion is the writer's to widen).
   */
  private def reshaped(c: Column, from: DataType, to: DataType): Column = (from, to) match {
    case (f: StructType, t: StructType) if f != t =>
      val fields = t.fields.toSeq.map { tf =>
        f.fields.find(_.name == tf.name).map(ff => reshaped(c.getField(ff.name), ff.dataType, tf.dataType))
          .getOrElse(F.lit(null).cast(tf.dataType)).as(tf.name)
      }
      F.when(c.isNull, F.lit(null)).otherwise(F.struct(fields: _*))
    case (f: ArrayType, t: ArrayType) if f != t => F.transform(c, x => reshaped(x, f.elementType, t.elementType))
    case (f: MapType, t: MapType) if f != t =>
      F.transform_values(F.transform_keys(c, (x, _) => reshaped(x, f.keyType, t.keyType)), (_, v) => reshaped(v, f.valueType, t.valueType))
    case _ => c
  }

  /**
   * The copy's `rows` with each of the changes' `columns` in their type (`theirs`): nested fields
   * the copy has and they lack left out, so its rows compare with theirs whole, as a top-level
   * column the changes lack is left out of the comparison.
   */
  private def inTheirTypes(rows: DataFrame, columns: Seq[String], theirs: StructType): DataFrame =
    rows.select(rows.schema.fields.toSeq.map { f =>
      columns.find(_.equalsIgnoreCase(f.name)).map(c => reshaped(F.col(quote(f.name)), f.dataType, theirs(c).dataType).as(c))
        .getOrElse(F.col(quote(f.name)))
    }: _*)

  /** The data files `files` of the copy at `snapshot`, for the position delete writers. */
  private def targets(table: Table, snapshot: Long, files: Set[String]): Map[String, TargetFile] =
    scala.util.Using.resource(table.newScan().useSnapshot(snapshot).planFiles())(_.asScala.toVector)
      .filter(task => files(task.file().location())).map { task =>
        task.file().location() -> TargetFile(task.spec().specId(), task.file().partition(),
          task.deletes().asScala.filter(_.content() == FileContent.POSITION_DELETES).toVector)
      }.toMap

  private def commit(session: SparkSession, tableName: String, table: Table, snapshot: Option[Long], dataFiles: Seq[DataFile],
      written: Seq[WrittenDeletes], mark: Option[(String, String)], deleted: Long, inserted: Long): Applied = {
    def discard(): Unit =
      TaskWrittenFiles.delete(table.io(), written.flatMap(_.files).map(_.location()) ++ dataFiles.map(_.location()), "apply_changes")
    // The same mark committed since the copy was read (one writer's batch applied twice at once, one
    // source twice): a conflict, so the next try finds the mark and skips.
    for ((key, _) <- mark; s <- snapshot; other <- concurrentMark(table, s, key)) {
      discard()
      throw new ApplyConflictException(s"another commit since snapshot $s carries $key = $other, as this one would", null)
    }
    val marker = SummaryKey -> java.util.UUID.randomUUID().toString
    val outcome = GuardedCommit.run(table, marker) { guarded =>
      if (dataFiles.isEmpty && written.isEmpty) {
        // Only the mark (changes that cancel out): an append of nothing, which conflicts with nothing.
        val append = guarded.newAppend().set(marker._1, marker._2)
        mark.foreach { case (k, v) => append.set(k, v) }
        append.commit()
      } else {
        val delta = guarded.newRowDelta()
        dataFiles.foreach(delta.addRows)
        written.flatMap(_.files).foreach(delta.addDeletes)
        written.flatMap(_.replaced).distinct.foreach(delta.removeDeletes)
        delta.set(marker._1, marker._2)
        mark.foreach { case (k, v) => delta.set(k, v) }
        // What can conflict: another commit removing or deleting from the data files whose rows this
        // one deletes by position. Rows others add never do (the rows found and the rows added do not
        // depend on them), so writers side by side append without conflicts.
        snapshot.foreach(s => delta.validateFromSnapshot(s))
        delta.validateDataFilesExist(written.flatMap(_.referenced).distinct.map(p => p: CharSequence).asJava)
          .validateDeletedFiles()
          .validateNoConflictingDeleteFiles()
          .commit()
      }
    }
    outcome match {
      case CommitOutcome.Committed(id, _) =>
        // The instance it committed through, and the one the catalog caches now (another, if its
        // entry expired during a long apply): the session's next read of the copy sees the commit.
        table.refresh()
        val cached = IcebergSparkTables.load(session, tableName)
        if (cached ne table) cached.refresh()
        Applied(Some(id), deleted, inserted, None)
      case CommitOutcome.NotCommitted(failure) =>
        discard()
        if (Failures.isConflict(failure)) throw new ApplyConflictException(Failures.describe(failure), failure)
        throw new ApplyRefusedException(s"eqdelete: applying changes to $tableName failed: ${Failures.describe(failure)}. " +
          "Nothing was committed and the files written were deleted; apply them again.", failure)
      case CommitOutcome.Unknown(failure, why) =>
        throw new CommitOutcomeUnknownException(s"eqdelete: the commit applying changes to $tableName has an unknown " +
          s"outcome: ${Failures.describe(failure)}; $why. Nothing was deleted; apply the same changes again: if the " +
          "commit landed, its mark makes that a no-op for a writer's batch or a source.", -1L, failure)
      case CommitOutcome.NothingToCommit => throw new IllegalStateException(s"eqdelete: nothing was committed to $tableName")
    }
  }

  /** The snapshot summary property marking one commit of apply_changes. */
  val SummaryKey = "eqdelete.apply-id"

  /** The value of summary key `key` a snapshot committed to `table` after snapshot `since` carries, if one does (newest first). */
  private def concurrentMark(table: Table, since: Long, key: String): Option[String] = {
    table.refresh()  // as the commit does first
    Option(table.currentSnapshot()).iterator.flatMap(ChangeRange.ancestors(table, _)).takeWhile(_.snapshotId() != since)
      .flatMap(s => Option(s.summary()).flatMap(m => Option(m.get(key)))).toSeq.headOption
  }

  /** The newest value of summary key `key` on the lineage of `table`'s current snapshot. */
  private def lastMark(table: Table, key: String): Option[String] =
    Option(table.currentSnapshot()).iterator.flatMap(ChangeRange.ancestors(table, _))
      .flatMap(s => Option(s.summary()).flatMap(m => Option(m.get(key)))).toSeq.headOption

  /** The changes' own columns (the table's), without the change columns; fails when it lacks `_change_type`. */
  private def dataColumns(changes: DataFrame, tableName: String): Seq[String] = {
    val changeColumns = Set(ChangesPlan.ChangeType, ChangesPlan.ChangeOrdinal, ChangesPlan.CommitSnapshotId)
    if (!changes.columns.contains(ChangesPlan.ChangeType)) {
      throw new IllegalArgumentException(s"eqdelete: apply_changes to $tableName needs the changes of a table, with " +
        s"their ${ChangesPlan.ChangeType} column (eqdelete.changes, changes_stream); these have ${changes.columns.mkString(", ")}")
    }
    changes.columns.toSeq.filterNot(changeColumns)
  }

  /**
   * Fails in one line when the copy lacks a column of the changes, has a required column they lack,
   * or a column whose type would not hold theirs (only the promotions Iceberg allows widen; a
   * narrower column would wrap values); or when a key is not a column of the changes.
   */
  private def checkColumns(session: SparkSession, table: Table, tableName: String, changes: DataFrame, columns: Seq[String],
      copyColumns: Seq[String], keys: Seq[String]): Unit = {
    val sparkSchema = IcebergSparkTables.sparkSchema(table.schema())
    def copyColumn(name: String) = sparkSchema.fields.find(_.name.equalsIgnoreCase(name))
    columns.foreach { c =>
      val theirs = changes.schema(c).dataType
      copyColumn(c) match {
        case None => throw new IllegalArgumentException(s"eqdelete: the changes have column $c, which $tableName lacks " +
          s"(${copyColumns.mkString(", ")}): add it to the copy first")
        case Some(f) if !holds(f.dataType, theirs) => throw new IllegalArgumentException(s"eqdelete: column $c of " +
          s"$tableName is ${f.dataType.simpleString} and the changes' is ${theirs.simpleString}: change the copy's column to " +
          "the changes' type first (a value is never narrowed)")
        case _ =>
      }
    }
    table.schema().columns().asScala.filter(f => f.isRequired && !columns.exists(_.equalsIgnoreCase(f.name()))).foreach { f =>
      throw new IllegalArgumentException(s"eqdelete: column ${f.name()} of $tableName is required and the changes lack it")
    }
    keys.filterNot(k => columns.contains(k)).foreach { k =>
      throw new IllegalArgumentException(s"eqdelete: key $k is not a column of the changes (${columns.mkString(", ")})")
    }
    keys.map(k => k -> changes.schema(k).dataType).collectFirst {
      case (k, t @ (_: StructType | _: ArrayType | _: MapType)) => throw new IllegalArgumentException(s"eqdelete: key $k is a " +
        s"${t.simpleString}: keys narrow the copy's read by their values, so each is a column of a simple type " +
        "(a number, a string, a date, ...); leave it out of keys")
    }
    columns.groupBy(_.toLowerCase(java.util.Locale.ROOT)).values.find(_.size > 1).foreach { same =>
      throw new IllegalArgumentException(s"eqdelete: the changes have columns ${same.mkString(" and ")}, which differ " +
        "only in case")
    }
  }

  /** The copy's required (NOT NULL) columns among `columns` that the changes may hold NULL in. */
  private def requiredColumns(table: Table, changes: DataFrame, columns: Seq[String]): Seq[String] =
    table.schema().columns().asScala.filter(_.isRequired).flatMap(f => columns.find(_.equalsIgnoreCase(f.name())))
      .filter(c => changes.schema(c).nullable).toSeq

  /**
   * Fails in one line, before anything is written, naming a row the changes add (of `added`) with
   * NULL in one of the `required` columns and the column: a job of its own, run only once the
   * counts found such a row.
   */
  private def refuseNullRequired(tableName: String, required: Seq[String], added: DataFrame): Unit = {
    val nullIn = required.map(c => F.col(s"$Row.${quote(c)}").isNull)
    added.where(nullIn.reduce(_ || _)).select(F.col(Row)).limit(1).collect().headOption.foreach { r =>
      val row = r.getStruct(0)
      val columnsNull = required.filter(c => row.isNullAt(row.fieldIndex(c)))
      throw new ApplyRefusedException(s"eqdelete: the changes add a row with NULL in ${columnsNull.mkString(", ")}, which " +
        s"$tableName declares NOT NULL, such as ${row.mkString("(", ", ", ")")}: make the copy's column nullable " +
        s"(ALTER TABLE $tableName ALTER COLUMN ${columnsNull.head} DROP NOT NULL) or keep such rows out; nothing was written")
    }
  }

  /**
   * Whether a column of type `copy` holds every value of type `theirs`: the same type, or one Iceberg
   * promotes it to, or a struct with more optional fields (nested too).
   */
  private def holds(copy: DataType, theirs: DataType): Boolean = (copy, theirs) match {
    // Every field of theirs, by name; the copy's others optional (NULL in the rows added).
    case (a: StructType, b: StructType) =>
      b.fields.forall(y => a.fields.exists(x => x.name == y.name && holds(x.dataType, y.dataType))) &&
        a.fields.filterNot(x => b.fields.exists(_.name == x.name)).forall(_.nullable)
    case (a: ArrayType, b: ArrayType) => holds(a.elementType, b.elementType)
    case (a: MapType, b: MapType) => holds(a.keyType, b.keyType) && holds(a.valueType, b.valueType)
    case (a, b) => ByFieldId.promotes(b, a)
  }

  private val Key = "_eqdelete_row_key"
  private val Row = "_eqdelete_row"
  private val Net = "_eqdelete_net"
  private def quote(name: String) = ChangesPlan.quote(name)
  private def quoted(name: String): Column = F.col(quote(name))
}

/** Applying changes lost to another writer's commit: tried again from the start. */
final class ApplyConflictException(message: String, cause: Throwable) extends RuntimeException(message, cause)

/** The changes cannot be applied to the copy as it is (a row it lacks, a NULL it refuses, a commit refused): nothing was committed. */
final class ApplyRefusedException(message: String, cause: Throwable = null) extends RuntimeException(message, cause)
