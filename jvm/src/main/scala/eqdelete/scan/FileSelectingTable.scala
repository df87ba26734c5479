package eqdelete.scan

import scala.jdk.CollectionConverters._

import eqdelete.explain.{CarriesDecision, Decision}
import eqdelete.planning.PlannedTasks

import org.apache.iceberg.{BatchScan, DeleteFile, FileContent, FileScanTask, Table}
import org.apache.spark.sql.eqdelete.compat.{IcebergInternals, PinnedIcebergTable}

/**
 * The same Iceberg table, pinned to one metadata version, whose batch scans return only the
 * files of one [[FileSelection]]; with `EqualityDeletesRemoved`, each task keeps its data file,
 * residual and position deletes but drops its equality deletes, so Iceberg's own Spark readers
 * read the rows that eqdelete then filters or anti-joins. With `Unchanged` it is a scan left
 * native, wrapped only so EXPLAIN and the decision records say why.
 *
 * `label` is the table's name as Spark shows it, so EXPLAIN names the rewrite.
 */
class FileSelectingTable private (
    original: Table,
    label: String,
    val selection: FileSelection,
    val decision: Decision,
    planned: Option[PlannedTasks])
  extends PinnedIcebergTable(original, label) with CarriesDecision {

  def repeatsDecision: Boolean = selection == FileSelection.WithoutEqualityDeletes

  override def newBatchScan(): BatchScan = new SelectingBatchScan(icebergBatchScan(), selection, this, planned)
}

object FileSelectingTable {
  /** `planned`: the tasks the delete planning got, served to scans with the same snapshot and filter. */
  def apply(original: Table, selection: FileSelection, decision: Decision, planned: Option[PlannedTasks]): FileSelectingTable = {
    val label =
      if (selection.appliesDeletes || selection == FileSelection.Unchanged) s"${original.name()} [${decision.describe}]"
      else s"${original.name()} [eqdelete: ${selection.describe}]"
    new FileSelectingTable(original, label, selection, decision, planned)
  }

  private[scan] def withoutEqualityDeletes(task: FileScanTask): FileScanTask = {
    val kept = task.deletes().asScala.filter(_.content() != FileContent.EQUALITY_DELETES).toArray[DeleteFile]
    IcebergInternals.withDeletes(task, kept)
  }
}
