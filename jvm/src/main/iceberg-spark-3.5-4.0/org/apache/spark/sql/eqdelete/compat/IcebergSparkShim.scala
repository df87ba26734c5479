package org.apache.spark.sql.eqdelete.compat

import org.apache.iceberg.Table
import org.apache.iceberg.spark.source.SparkTable

/** Iceberg's Spark 3.5 and 4.0 modules: `SparkTable`'s constructors pin a branch or a snapshot. */
private[compat] object IcebergSparkShim {
  /**
   * The snapshot a scan of `table` reads. These modules leave `snapshotId` unset unless the
   * query travels in time; the scan then reads the branch's head or the current snapshot of
   * the table as loaded. None for a table without snapshots.
   */
  def snapshotId(table: SparkTable): Option[Long] =
    Option(table.snapshotId()).map(_.longValue()).orElse {
      val snapshot = Option(table.branch()).map(b => table.table().snapshot(b)).getOrElse(table.table().currentSnapshot())
      Option(snapshot).map(_.snapshotId())
    }

  /** The ways to show `table` to Spark: at `branch`, at its current snapshot, at `snapshotId`. */
  def views(table: Table, branch: Option[String], snapshotId: Long): Seq[() => SparkTable] =
    branch.toSeq.map(b => () => new SparkTable(table, b, false)) ++ Seq(
      () => new SparkTable(table, false),
      () => new SparkTable(table, java.lang.Long.valueOf(snapshotId), false))
}
