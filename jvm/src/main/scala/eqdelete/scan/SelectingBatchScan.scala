package eqdelete.scan

import java.util

import scala.jdk.CollectionConverters._

import eqdelete.planning.PlannedTasks

import org.apache.iceberg.{BatchScan, FileScanTask, ScanTask, ScanTaskGroup, Schema, Snapshot, Table}
import org.apache.iceberg.expressions.Expression
import org.apache.iceberg.io.CloseableIterable
import org.apache.iceberg.metrics.MetricsReporter
import org.apache.spark.sql.eqdelete.compat.ScanLimitHint

/**
 * Delegates everything to Iceberg's scan; only the planned files are selected or changed. When
 * the delete planning already planned this very scan (same snapshot, filter and case
 * sensitivity), its tasks are served instead of planning the manifests again, and Iceberg's
 * report of that planning goes to the reporters registered on this scan (Iceberg's Spark scan
 * registers one, whose report becomes the scan node's metrics in Spark's UI), as it would have
 * had Iceberg planned the scan itself.
 */
private[scan] final class SelectingBatchScan(delegate: BatchScan, selection: FileSelection, table: Table,
    planned: Option[PlannedTasks], reporters: Seq[MetricsReporter] = Nil) extends BatchScan with ScanLimitHint {

  private def wrap(scan: BatchScan): BatchScan = new SelectingBatchScan(scan, selection, table, planned, reporters)
  override protected def wrapped: BatchScan = delegate
  override protected def rewrap(scan: BatchScan): BatchScan = wrap(scan)

  override def planFiles(): CloseableIterable[ScanTask] = {
    val snapshot = Option(delegate.snapshot()).map(_.snapshotId())
    val tasks: CloseableIterable[ScanTask] = planned.filter { p =>
      snapshot.exists(s => p.serves(s, delegate.filter(), delegate.isCaseSensitive))
    } match {
      case Some(p) =>
        ScanPlanning.servedPlanned.incrementAndGet()
        for (report <- p.reports; reporter <- reporters) reporter.report(report)
        CloseableIterable.withNoopClose(p.tasks.map(t => t: ScanTask).asJava)
      case None =>
        ScanPlanning.plannedAgain.incrementAndGet()
        delegate.planFiles()
    }
    val selected: CloseableIterable[ScanTask] = CloseableIterable.filter(tasks, (task: ScanTask) => task match {
      case file: FileScanTask => selection.selects(file)
      case other => throw new IllegalStateException(s"eqdelete: unexpected Iceberg scan task ${other.getClass.getName}")
    })
    if (!selection.appliesDeletes) selected
    else CloseableIterable.transform(selected, (task: ScanTask) => task.asInstanceOf[FileScanTask] match {
      case file if FileSelection.hasEqualityDeletes(file) => FileSelectingTable.withoutEqualityDeletes(file): ScanTask
      case file => file
    })
  }

  override def planTasks(): CloseableIterable[ScanTaskGroup[ScanTask]] =
    throw new UnsupportedOperationException("eqdelete: Spark plans task groups from planFiles()")

  override def table(): Table = table
  override def useSnapshot(snapshotId: Long): BatchScan = wrap(delegate.useSnapshot(snapshotId))
  override def useRef(ref: String): BatchScan = wrap(delegate.useRef(ref))
  override def asOfTime(timestampMillis: Long): BatchScan = wrap(delegate.asOfTime(timestampMillis))
  override def snapshot(): Snapshot = delegate.snapshot()
  override def option(property: String, value: String): BatchScan = wrap(delegate.option(property, value))
  override def project(schema: Schema): BatchScan = wrap(delegate.project(schema))
  override def caseSensitive(caseSensitive: Boolean): BatchScan = wrap(delegate.caseSensitive(caseSensitive))
  override def isCaseSensitive: Boolean = delegate.isCaseSensitive
  override def includeColumnStats(): BatchScan = wrap(delegate.includeColumnStats())
  override def includeColumnStats(columns: util.Collection[String]): BatchScan =
    wrap(delegate.includeColumnStats(columns))
  override def select(columns: util.Collection[String]): BatchScan = wrap(delegate.select(columns))
  override def filter(expr: Expression): BatchScan = wrap(delegate.filter(expr))
  override def filter(): Expression = delegate.filter()
  override def ignoreResiduals(): BatchScan = wrap(delegate.ignoreResiduals())
  override def planWith(executor: util.concurrent.ExecutorService): BatchScan = wrap(delegate.planWith(executor))
  override def schema(): Schema = delegate.schema()
  override def targetSplitSize(): Long = delegate.targetSplitSize()
  override def splitLookback(): Int = delegate.splitLookback()
  override def splitOpenFileCost(): Long = delegate.splitOpenFileCost()
  override def metricsReporter(reporter: MetricsReporter): BatchScan =
    new SelectingBatchScan(delegate.metricsReporter(reporter), selection, table, planned, reporters :+ reporter)
}
