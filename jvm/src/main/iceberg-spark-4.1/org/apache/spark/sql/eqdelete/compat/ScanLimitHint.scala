package org.apache.spark.sql.eqdelete.compat

import org.apache.iceberg.BatchScan

/** `Scan.minRowsRequested` (a LIMIT's hint, Iceberg 1.11+, whose default throws), passed on to the wrapped scan. */
trait ScanLimitHint extends BatchScan {
  protected def wrapped: BatchScan
  protected def rewrap(scan: BatchScan): BatchScan

  override def minRowsRequested(numRows: Long): BatchScan = rewrap(wrapped.minRowsRequested(numRows))
}
