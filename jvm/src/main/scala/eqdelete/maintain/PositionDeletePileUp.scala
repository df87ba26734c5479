package eqdelete.maintain

import eqdelete.planning.LiveDeleteFiles

import org.apache.iceberg.Table
import org.apache.spark.sql.eqdelete.compat.IcebergInternals

/**
 * How many position delete files (deletion vectors aside) the most crowded partition of a
 * snapshot holds: each resolve on format v2 adds a file per partition it touches, which readers
 * then open, until a compaction rewrites them into one.
 */
object PositionDeletePileUp {
  def largestPartition(table: Table, snapshotId: Long): Int = {
    val files = LiveDeleteFiles.positionDeletes(table, snapshotId).filterNot(IcebergInternals.isDeletionVector)
    if (files.isEmpty) 0
    else files.groupBy(f => (f.specId(), table.specs().get(f.specId()).partitionToPath(f.partition()))).values.map(_.size).max
  }
}
