package org.apache.spark.sql.eqdelete.compat

import org.apache.iceberg.Table
import org.apache.iceberg.spark.TimeTravel
import org.apache.iceberg.spark.source.SparkTable

/** Iceberg's Spark 4.1 module: `SparkTable.create` pins a branch or a time-travel point. */
private[compat] object IcebergSparkShim {
  /** The snapshot a scan of `table` reads: this module pins it when the table is loaded. */
  def snapshotId(table: SparkTable): Option[Long] = Option(table.snapshotId()).map(_.longValue())

  /** The ways to show `table` to Spark: at `branch`, at its current snapshot, at `snapshotId`. */
  def views(table: Table, branch: Option[String], snapshotId: Long): Seq[() => SparkTable] =
    branch.toSeq.map(b => () => SparkTable.create(table, b)) ++ Seq(
      () => new SparkTable(table),
      () => SparkTable.create(table, TimeTravel.version(snapshotId.toString)))
}
