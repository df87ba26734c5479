package eqdelete.maintain

import scala.jdk.CollectionConverters._

import eqdelete.planning.LiveDeleteFiles

import org.apache.iceberg.Table

/**
 * How far resolving lags behind the writer: the age of the oldest equality delete live at the
 * table's current snapshot, the time since the commit that added it (its data sequence number's
 * snapshot). From metadata only.
 */
object EqualityDeleteLag {

  /**
   * The live equality delete files and the lag in seconds (0 when none is live). A delete whose
   * snapshot has expired is at least as old as the oldest snapshot kept, which is what it counts.
   */
  def of(table: Table, nowMillis: Long): (Int, Double) = {
    val current = Option(table.currentSnapshot())
    val live = current.map(s => LiveDeleteFiles.equalityDeletes(table, s.snapshotId())).getOrElse(Nil)
    if (live.isEmpty) (0, 0.0)
    else {
      val oldest = live.map(f => Option(f.dataSequenceNumber()).map(_.longValue()).getOrElse(0L)).min
      val snapshots = table.snapshots().asScala.toVector
      val committed = snapshots.find(_.sequenceNumber() == oldest).getOrElse(snapshots.minBy(_.sequenceNumber()))
      (live.size, math.max(0L, nowMillis - committed.timestampMillis()) / 1000.0)
    }
  }
}
