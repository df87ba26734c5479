package eqdelete.maintain

import scala.collection.mutable
import scala.jdk.CollectionConverters._
import scala.util.Using
import scala.util.control.NonFatal

import eqdelete.commit.Failures
import eqdelete.cost.NativeReadEstimate
import eqdelete.planning.{KnownMisreads, LiveDeleteFiles}

import org.apache.iceberg.{FileContent, Table}
import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.eqdelete.compat.{IcebergInternals, IcebergSparkTables}
import org.apache.spark.sql.types.{BooleanType, DataType, DoubleType, IntegerType, LongType, StringType}

/**
 * A table's equality-delete debt and what maintain would do about it, from metadata only (one
 * planning of the current snapshot, as a reader's would be): `python -m eqdelete status` and
 * `SELECT * FROM eqdelete_status('<pattern>')` show one per table, and `maintain --tables`
 * orders its work by them.
 *
 * @param nativeOverFloor        `NativeReadEstimate`: what Iceberg's reader does for a full read
 *                               over the floor (1.0 with no equality deletes)
 * @param positionDeleteFilesPerDataFile the most position delete files a reader of one data file
 *                               opens (`PositionDeletePileUp`; deletion vectors aside)
 * @param deadRowRatio           rows deleted by position deletes or deletion vectors over data rows
 *                               (rows equality deletes remove are counted once resolved)
 * @param nativeMisreads         why Iceberg's own reader (and so every reader of the equality deletes) reads
 *                               the table wrongly until it is resolved, if it does (`KnownMisreads`)
 * @param next                   what the next round would do, in words
 * @param error                  why the table could not be looked at; its other fields are then zero
 */
final case class TableStatus(
    table: String,
    snapshotId: Option[Long],
    formatVersion: Int,
    dataFiles: Long,
    dataRows: Long,
    equalityDeleteFiles: Int,
    equalityDeleteRows: Long,
    lagSeconds: Double,
    positionDeleteFiles: Int,
    positionDeletedRows: Long,
    positionDeleteFilesPerDataFile: Int,
    deadRowRatio: Double,
    nativeOverFloor: Double,
    maintainEnabled: Boolean,
    intervalSeconds: Option[Long],
    nativeMisreads: Option[String],
    next: String,
    error: Option[String]) {

  def values: Seq[Any] = Seq(table, snapshotId.map(Long.box).orNull, formatVersion, dataFiles, dataRows, equalityDeleteFiles,
    equalityDeleteRows, lagSeconds, positionDeleteFiles, positionDeletedRows, positionDeleteFilesPerDataFile, deadRowRatio,
    nativeOverFloor, maintainEnabled, intervalSeconds.map(Long.box).orNull, nativeMisreads.orNull, next, error.orNull)

  def asMap: Map[String, Any] = TableStatus.Fields.map(_._1).zip(values).toMap
}

object TableStatus {
  /** The one schema of a status row; Python's `TableStatus` has the same fields (a test checks both). */
  val Fields: Seq[(String, DataType)] = Seq(
    "table" -> StringType, "snapshot_id" -> LongType, "format_version" -> IntegerType, "data_files" -> LongType,
    "data_rows" -> LongType, "equality_delete_files" -> IntegerType, "equality_delete_rows" -> LongType,
    "lag_seconds" -> DoubleType, "position_delete_files" -> IntegerType, "position_deleted_rows" -> LongType,
    "position_delete_files_per_data_file" -> IntegerType, "dead_row_ratio" -> DoubleType,
    "native_over_floor" -> DoubleType, "maintain_enabled" -> BooleanType, "interval_seconds" -> LongType,
    "native_misreads" -> StringType, "next" -> StringType, "error" -> StringType)
  val Nullable: Set[String] = Set("snapshot_id", "interval_seconds", "native_misreads", "error")

  /** The status of every table `patterns` names (`TablePattern`); a table that cannot be read gets a row with its error. */
  def of(session: SparkSession, patterns: String): Seq[TableStatus] =
    TablePattern.tables(session, patterns).flatMap { name =>
      try Some(of(session, IcebergSparkTables.current(session, name)))
      catch {
        // A namespace may hold other formats' tables too: a pattern passes them by.
        case e: IllegalArgumentException if String.valueOf(e.getMessage).contains("not an Iceberg table") => None
        case NonFatal(e) => Some(failed(name, e))
      }
    }

  def of(session: SparkSession, table: Table): TableStatus = {
    val settings = TableSettings.of(table, session.sessionState.conf)
    val version = IcebergInternals.formatVersion(table)
    Option(table.currentSnapshot()) match {
      case None =>
        TableStatus(table.name(), None, version, 0, 0, 0, 0, 0.0, 0, 0, 0, 0.0, 1.0, settings.enabled,
          settings.intervalSeconds, None, "nothing (no snapshot)", None)
      case Some(snapshot) =>
        val id = snapshot.snapshotId()
        val equality = LiveDeleteFiles.equalityDeletes(table, id)
        val positions = LiveDeleteFiles.positionDeletes(table, id)
        val (_, lag) = EqualityDeleteLag.of(table, System.currentTimeMillis())
        val pileUp = PositionDeletePileUp.mostFilesPerDataFile(table, id)
        val planned = plannedRead(table, id)
        val dead = positions.map(_.recordCount()).sum
        val next = NextRound.of(settings, version, equality.size, pileUp)
        val equalityRows = equality.map(_.recordCount()).sum
        val data = DataCompaction.plan(table, settings, System.currentTimeMillis()) match {
          case DataCompaction.Plan.Off | DataCompaction.Plan.NothingDue => ""
          case due => s"; ${due.describe}"
        }
        TableStatus(
          table = table.name(), snapshotId = Some(id), formatVersion = version,
          dataFiles = planned.dataFiles, dataRows = planned.dataRows,
          equalityDeleteFiles = equality.size, equalityDeleteRows = equalityRows, lagSeconds = lag,
          positionDeleteFiles = positions.size, positionDeletedRows = dead, positionDeleteFilesPerDataFile = pileUp,
          deadRowRatio = if (planned.dataRows == 0) 0.0 else math.min(1.0, dead.toDouble / planned.dataRows),
          nativeOverFloor = NativeReadEstimate.overFloor(planned.dataRows, dead, planned.deleteRowsLoadedByTasks),
          maintainEnabled = settings.enabled, intervalSeconds = settings.intervalSeconds,
          nativeMisreads = KnownMisreads.of(table.schema(), equality),
          next = if (settings.enabled) next.describe(equality.size, equalityRows, pileUp) + data
          else s"nothing under maintain --tables (eqdelete.maintain.enabled=false); by name: ${next.describe(equality.size, equalityRows, pileUp)}$data",
          error = None)
    }
  }

  /** A row for a table that could not be looked at: the error in one line. */
  def failed(name: String, e: Throwable): TableStatus =
    TableStatus(name, None, 0, 0, 0, 0, 0, 0.0, 0, 0, 0, 0.0, 0.0, maintainEnabled = false, None, None, "nothing (see error)",
      Some(Failures.describe(e)))

  private final case class PlannedRead(dataFiles: Long, dataRows: Long, deleteRowsLoadedByTasks: Long)

  /** A full read's plan, as Iceberg makes it for a reader: data files and rows, and the equality delete rows its tasks load. */
  private def plannedRead(table: Table, snapshotId: Long): PlannedRead = {
    val seen = mutable.HashSet.empty[String]
    var rows, loaded = 0L
    Using.resource(table.newScan().useSnapshot(snapshotId).planFiles()) { tasks =>
      tasks.asScala.foreach { task =>
        if (seen.add(task.file().location())) rows += task.file().recordCount()
        loaded += task.deletes().asScala.filter(_.content() == FileContent.EQUALITY_DELETES).map(_.recordCount()).sum
      }
    }
    PlannedRead(seen.size.toLong, rows, loaded)
  }
}
