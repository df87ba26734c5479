package eqdelete.explain

import eqdelete.cost.Strategy
import eqdelete.planning.ScanDeletes

import org.apache.spark.sql.catalyst.trees.TreeNodeTag

/**
 * What eqdelete did with one Iceberg scan, for EXPLAIN and the Python decision records: a view
 * of the scan's rewrite plan (strategy, reason, and `plan`, the layout and each delete part's
 * execution), so what it says is what runs.
 */
final case class Decision(
    table: String,
    snapshotId: Long,
    strategy: Strategy,
    reason: String,
    plan: String,
    deleteFiles: Int,
    deleteRows: Long,
    dataFiles: Int,
    dataFilesWithDeletes: Int,
    covered: Seq[CoveredRows] = Nil) {

  def rewritten: Boolean = strategy != Strategy.Native

  /**
   * The decision's fields as Python's `eqdelete.Decision` and SQL's `eqdelete_decisions` name
   * them; `covered_delete_rows` an Option.
   */
  def record: Map[String, Any] = Map(
    "table" -> table, "snapshot_id" -> snapshotId, "strategy" -> strategy.name, "reason" -> reason, "plan" -> plan,
    "delete_files" -> deleteFiles, "delete_rows" -> deleteRows, "data_files" -> dataFiles,
    "data_files_with_deletes" -> dataFilesWithDeletes, "covered_delete_rows" -> coveredDeleteRows)

  /**
   * Delete rows dropped because single-column deletes cover them: None when the plan covers
   * none, or until the query has read them (it is counted as they are read).
   */
  def coveredDeleteRows: Option[Long] = {
    val known = covered.flatMap(_.rows)
    if (known.isEmpty) None else Some(known.sum)
  }

  def describe: String =
    if (rewritten) {
      s"eqdelete $strategy: $deleteFiles equality delete file(s), $deleteRows delete row(s), " +
        s"$dataFilesWithDeletes of $dataFiles data file(s) with equality deletes; $plan; $reason"
    } else {
      s"eqdelete ${Strategy.Native}: $reason"
    }
}

object Decision {
  /** The decision for a scan, with the counts of its deletes (zeros when there is none). */
  def of(table: String, snapshotId: Long, strategy: Strategy, reason: String, plan: String,
      deletes: Option[ScanDeletes], covered: Seq[CoveredRows] = Nil): Decision =
    Decision(table, snapshotId, strategy, reason, plan,
      deletes.map(_.deleteFiles).getOrElse(0), deletes.map(_.deleteRecords).getOrElse(0L),
      deletes.map(_.dataFiles).getOrElse(0), deletes.map(_.dataFilesWithDeletes).getOrElse(0), covered)

  /** Marks a scan eqdelete left native, with why; also stops the rule from trying again. */
  val NativeTag: TreeNodeTag[Decision] = TreeNodeTag[Decision]("eqdelete.native")
}

/**
 * A table a rewritten (or named native) scan reads through, carrying the scan's decision.
 * `repeatsDecision`: the plain half of a split scan, whose decision the other half reports.
 */
trait CarriesDecision {
  def decision: Decision
  def repeatsDecision: Boolean
}
