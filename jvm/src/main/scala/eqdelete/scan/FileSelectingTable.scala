package eqdelete.scan

import java.util

import scala.jdk.CollectionConverters._

import eqdelete.explain.{CarriesDecision, Decision}
import eqdelete.planning.PlannedScan

import org.apache.iceberg.{BaseTable, BatchScan, DeleteFile, FileContent, FileScanTask, Table, TableProperties}
import org.apache.spark.sql.eqdelete.compat.IcebergInternals

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
    new FileSelectingTable(ops, label, selection, decision, planned)
  }

  private[scan] def withoutEqualityDeletes(task: FileScanTask): FileScanTask = {
    val kept = task.deletes().asScala.filter(_.content() != FileContent.EQUALITY_DELETES).toArray[DeleteFile]
    IcebergInternals.withDeletes(task, kept)
  }
}
