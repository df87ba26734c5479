package eqdelete.maintain

import scala.jdk.CollectionConverters._

import org.apache.spark.sql.types.{BooleanType, DataType, DoubleType, IntegerType, LongType, StringType}

/**
 * What a round of maintain did ([[MaintainRound]]).
 *
 * @param startingSnapshotId the snapshot its last resolve attempt started from
 * @param snapshotId         the resolve's commit; None when nothing was committed (nothing to
 *                           resolve, or every attempt conflicted)
 * @param conflicts          resolve attempts whose commit conflicted with a concurrent one (all of
 *                           them when `conflicts == attempts`: nothing committed)
 * @param compactionConflicted a compaction's commit (position delete files, or data files)
 *                           conflicted (it is left to the next round)
 * @param lastConflict       the last conflict's message
 * @param equalityDeleteFilesLive equality delete files live after the round (newer ones the
 *                           writer committed while it ran, or all of them if it could not commit)
 * @param lagSeconds         after the round, the age of the oldest live equality delete: how
 *                           long ago the commit that added it was made (0 when none is live)
 * @param commitNote         what the client saw of a commit that landed although its answer was
 *                           lost, or of a compaction whose outcome is unknown; None when neither
 * @param deferred           what the round left to a later one and why: live equality deletes
 *                           (fewer files than the table's `eqdelete.maintain.min-equality-delete-files`),
 *                           data files due for compaction past the hour's byte budget
 * @param dataFilesCompacted data files rewritten because deletes removed enough of their rows
 *                           ([[DataCompaction]]), into `dataFilesWritten` files; `dataBytesRewritten` their bytes
 * @param liveIndexEntries   entries of the table's kept index of its live rows after the round
 *                           (0 without one), `liveIndexBytes` the bytes its stores hold
 * @param liveIndexNote      how the round came by its kept index when not by bringing it forward:
 *                           built from the table (why), restored from a saved version, or a saved
 *                           version that could not be loaded and the plan without it used
 * @param liveIndexCheckpointBytes  bytes the round wrote to durable storage for its kept index
 *                           (deltas, snapshots, its manifest); `liveIndexStoredBytes` the bytes its
 *                           current version takes there
 * @param stoppedAt          the step at which a stop ([[RoundStop]]: the service's SIGTERM) ended the
 *                           round; what it committed before that step stands, nothing after it ran
 */
final case class RoundResult(
    table: String,
    startingSnapshotId: Long,
    snapshotId: Option[Long],
    attempts: Int,
    conflicts: Int,
    compactionConflicted: Boolean,
    lastConflict: Option[String],
    equalityDeleteFilesRemoved: Int,
    rowsResolved: Long,
    dataFilesRead: Int,
    positionDeleteFilesWritten: Int,
    deletionVectorsWritten: Int,
    positionDeleteFilesCompacted: Int,
    compactionFilesWritten: Int,
    equalityDeleteFilesLive: Int,
    lagSeconds: Double,
    seconds: Double,
    commitNote: Option[String] = None,
    deferred: Option[String] = None,
    dataFilesCompacted: Int = 0,
    dataFilesWritten: Int = 0,
    dataBytesRewritten: Long = 0,
    liveIndexEntries: Long = 0,
    liveIndexBytes: Long = 0,
    liveIndexNote: Option[String] = None,
    stoppedAt: Option[String] = None,
    liveIndexCheckpointBytes: Long = 0,
    liveIndexStoredBytes: Long = 0) {

  def values: Seq[Any] = Seq(table, startingSnapshotId, snapshotId.map(Long.box).orNull, attempts, conflicts,
    compactionConflicted, lastConflict.orNull, equalityDeleteFilesRemoved, rowsResolved, dataFilesRead, positionDeleteFilesWritten,
    deletionVectorsWritten, positionDeleteFilesCompacted, compactionFilesWritten, equalityDeleteFilesLive, lagSeconds, seconds,
    commitNote.orNull, deferred.orNull, dataFilesCompacted, dataFilesWritten, dataBytesRewritten, liveIndexEntries,
    liveIndexBytes, liveIndexNote.orNull, stoppedAt.orNull, liveIndexCheckpointBytes, liveIndexStoredBytes)

  /** Field name to value, for Python and the SQL procedure's row. */
  def asJava: java.util.Map[String, Any] = RoundResult.Fields.map(_._1).zip(values).toMap.asJava
}

object RoundResult {
  /** The one schema of a round's result; Python's `MaintainRound` has the same fields (a test checks both). */
  val Fields: Seq[(String, DataType)] = Seq(
    "table" -> StringType, "starting_snapshot_id" -> LongType, "snapshot_id" -> LongType, "attempts" -> IntegerType,
    "conflicts" -> IntegerType, "compaction_conflicted" -> BooleanType, "last_conflict" -> StringType, "equality_delete_files_removed" -> IntegerType,
    "rows_resolved" -> LongType, "data_files_read" -> IntegerType, "position_delete_files_written" -> IntegerType,
    "deletion_vectors_written" -> IntegerType, "position_delete_files_compacted" -> IntegerType,
    "compaction_files_written" -> IntegerType, "equality_delete_files_live" -> IntegerType, "lag_seconds" -> DoubleType,
    "seconds" -> DoubleType, "commit_note" -> StringType, "deferred" -> StringType,
    "data_files_compacted" -> IntegerType, "data_files_written" -> IntegerType, "data_bytes_rewritten" -> LongType,
    "live_index_entries" -> LongType, "live_index_bytes" -> LongType, "live_index_note" -> StringType,
    "stopped_at" -> StringType, "live_index_checkpoint_bytes" -> LongType, "live_index_stored_bytes" -> LongType)
  val Nullable: Set[String] = Set("snapshot_id", "last_conflict", "commit_note", "deferred", "live_index_note", "stopped_at")
}
