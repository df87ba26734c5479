package eqdelete.rules

import eqdelete.planning.DeletePlan

import org.apache.spark.sql.catalyst.trees.TreeNodeTag

/** What eqdelete did with one Iceberg scan, for EXPLAIN and the Python decision records. */
final case class Decision(
    table: String,
    snapshotId: Long,
    strategy: String,
    reason: String,
    deleteFiles: Int,
    deleteRows: Long,
    dataFiles: Int,
    dataFilesWithDeletes: Int) {

  def rewritten: Boolean = strategy != "native"

  def describe: String =
    if (rewritten) {
      s"eqdelete $strategy: $deleteFiles equality delete file(s), $deleteRows delete row(s), " +
        s"$dataFilesWithDeletes of $dataFiles data file(s) with equality deletes; $reason"
    } else {
      s"eqdelete native: $reason"
    }
}

object Decision {
  /** The decision for a scan, with the counts of its delete plan (zeros when there is none). */
  def of(table: String, snapshotId: Long, strategy: String, reason: String, plan: Option[DeletePlan]): Decision =
    Decision(table, snapshotId, strategy, reason,
      plan.map(_.deleteFiles).getOrElse(0), plan.map(_.deleteRecords).getOrElse(0L),
      plan.map(_.dataFiles).getOrElse(0), plan.map(_.dataFilesWithDeletes).getOrElse(0))

  /** Marks a scan eqdelete left native, with why; also stops the rule from trying again. */
  val NativeTag: TreeNodeTag[Decision] = TreeNodeTag[Decision]("eqdelete.native")
}
