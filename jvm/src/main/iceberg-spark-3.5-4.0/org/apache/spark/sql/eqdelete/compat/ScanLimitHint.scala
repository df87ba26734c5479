package org.apache.spark.sql.eqdelete.compat

import java.lang.reflect.InvocationTargetException

import org.apache.iceberg.BatchScan

/**
 * `Scan.minRowsRequested`, a LIMIT's hint to Iceberg's scan, came in Iceberg 1.11, and its default
 * throws. These lines compile against Iceberg 1.10, which lacks it, and run on 1.11 and 1.12 too,
 * whose Spark modules call it: so a wrapping scan declares it with its erased signature (the JVM
 * then takes it for the interface's, `Scan.minRowsRequested(J)Ljava/lang/Object;`, the one those
 * modules call) and passes it on reflectively. Never called on 1.10. Should a later release
 * declare a covariant `BatchScan minRowsRequested(long)` on `BatchScan` itself, calls through
 * that descriptor would miss this method: these jars would need compiling against that release.
 */
trait ScanLimitHint extends BatchScan {
  protected def wrapped: BatchScan
  protected def rewrap(scan: BatchScan): BatchScan

  def minRowsRequested(numRows: Long): AnyRef = {
    val method = classOf[BatchScan].getMethod("minRowsRequested", java.lang.Long.TYPE)
    try rewrap(method.invoke(wrapped, Long.box(numRows)).asInstanceOf[BatchScan])
    catch { case e: InvocationTargetException if e.getCause != null => throw e.getCause }
  }
}
