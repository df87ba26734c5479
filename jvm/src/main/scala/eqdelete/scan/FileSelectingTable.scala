package eqdelete.scan

import java.util

import scala.jdk.CollectionConverters._

import eqdelete.explain.{CarriesDecision, Decision}
import eqdelete.planning.PlannedScan

import org.apache.iceberg.{BaseTable, BatchScan, DeleteFile, FileContent, FileScanTask, ScanTask, ScanTaskGroup, Schema, Snapshot, Table, TableProperties}
import org.apache.iceberg.expressions.Expression
import org.apache.iceberg.io.CloseableIterable
import org.apache.iceberg.metrics.MetricsReporter
import org.apache.spark.sql.eqdelete.compat.{IcebergInternals, ScanLimitHint}

/** Which planned files a rewritten scan reads. */
sealed trait FileSelection extends Serializable {
  def describe: String
  /** Whether the selected files are read with equality deletes dropped, for eqdelete to apply. */
  def appliesDeletes: Boolean
  def selects(task: FileScanTask): Boolean
}

object FileSelection {
  /** Files with no equality deletes, read exactly as Iceberg plans them. */
  case object WithoutEqualityDeletes extends FileSelection {
    val describe = "files without equality deletes"
    val appliesDeletes = false
    def selects(task: FileScanTask): Boolean = !hasEqualityDeletes(task)
  }

  /** Files with equality deletes, read with those removed (position deletes and DVs kept). */
  case object EqualityDeletesRemoved extends FileSelection {
    val describe = "files with equality deletes, applied by eqdelete"
    val appliesDeletes = true
    def selects(task: FileScanTask): Boolean = hasEqualityDeletes(task)
  }

  /**
   * Every planned file, equality deletes removed where there are any: one scan instead of a
   * union of two, worth it when few rows are in files without deletes.
   */
  case object AllEqualityDeletesRemoved extends FileSelection {
    val describe = "all files, equality deletes applied by eqdelete"
    val appliesDeletes = true
    def selects(task: FileScanTask): Boolean = true
  }

  /** Every file exactly as Iceberg plans it: a scan eqdelete left native, named so EXPLAIN says why. */
  case object Unchanged extends FileSelection {
    val describe = "read natively"
    val appliesDeletes = false
    def selects(task: FileScanTask): Boolean = true
  }

  def hasEqualityDeletes(task: FileScanTask): Boolean =
    task.deletes().asScala.exists(_.content() == FileContent.EQUALITY_DELETES)
}

/**
 * The same Iceberg table, pinned to one metadata version, whose batch scans return only the
 * files of one [[FileSelection]]; with `EqualityDeletesRemoved`, each task keeps its data file,
 * residual and position deletes but drops its equality deletes, so Iceberg's own Spark readers
 * read the rows that eqdelete then filters or anti-joins. With `Unchanged` it is a scan left
 * native, wrapped only so EXPLAIN and the decision records say why.
 *
 * `label` is the table's name as Spark shows it, so EXPLAIN names the rewrite.
 */
class FileSelectingTable(
    ops: PinnedTableOperations,
    label: String,
    val original: Table,
    val selection: FileSelection,
    val decision: Decision,
    planned: Option[PlannedScan])
  extends BaseTable(ops, label) with CarriesDecision {

  def repeatsDecision: Boolean = selection == FileSelection.WithoutEqualityDeletes

  // Distributed planning would bypass newBatchScan; the file selection must see every task.
  override def properties(): util.Map[String, String] = {
    val props = new util.HashMap[String, String](super.properties())
    props.put(TableProperties.DATA_PLANNING_MODE, "local")
    props.put(TableProperties.DELETE_PLANNING_MODE, "local")
    props
  }

  override def newBatchScan(): BatchScan = new SelectingBatchScan(super.newBatchScan(), selection, this, planned)
}

object FileSelectingTable {
  /** `planned`: the tasks the delete planning got, served to scans with the same snapshot and filter. */
  def apply(original: Table, selection: FileSelection, decision: Decision, planned: Option[PlannedScan]): FileSelectingTable = {
    val base = original.asInstanceOf[BaseTable]
    val ops = new PinnedTableOperations(base.operations().current(), original.io(), original.locationProvider())
    val label =
      if (selection.appliesDeletes || selection == FileSelection.Unchanged) s"${original.name()} [${decision.describe}]"
      else s"${original.name()} [eqdelete: ${selection.describe}]"
    new FileSelectingTable(ops, label, original, selection, decision, planned)
  }

  private[scan] def withoutEqualityDeletes(task: FileScanTask): FileScanTask = {
    val kept = task.deletes().asScala.filter(_.content() != FileContent.EQUALITY_DELETES).toArray[DeleteFile]
    IcebergInternals.withDeletes(task, kept)
  }
}

/**
 * Delegates everything to Iceberg's scan; only the planned files are selected or changed. When
 * the delete planning already planned this very scan (same snapshot, filter and case
 * sensitivity), its tasks are served instead of planning the manifests again.
 */
private[scan] final class SelectingBatchScan(delegate: BatchScan, selection: FileSelection, table: Table,
    planned: Option[PlannedScan]) extends BatchScan with ScanLimitHint {

  private def wrap(scan: BatchScan): BatchScan = new SelectingBatchScan(scan, selection, table, planned)
  override protected def wrapped: BatchScan = delegate
  override protected def rewrap(scan: BatchScan): BatchScan = wrap(scan)

  override def planFiles(): CloseableIterable[ScanTask] = {
    val snapshot = Option(delegate.snapshot()).map(_.snapshotId())
    val tasks: CloseableIterable[ScanTask] = planned.filter { p =>
      snapshot.exists(s => p.serves(s, delegate.filter(), delegate.isCaseSensitive))
    } match {
      case Some(p) =>
        ScanPlanning.servedPlanned.incrementAndGet()
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
  override def metricsReporter(reporter: MetricsReporter): BatchScan = wrap(delegate.metricsReporter(reporter))
}

/** How often rewritten scans were served the delete planning's tasks, or planned again (for tests and logs). */
object ScanPlanning {
  val servedPlanned = new java.util.concurrent.atomic.AtomicLong()
  val plannedAgain = new java.util.concurrent.atomic.AtomicLong()
}
