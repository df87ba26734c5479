package eqdelete.rules

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
  /** Marks a scan eqdelete left native, with why; also stops the rule from trying again. */
  val NativeTag: TreeNodeTag[Decision] = TreeNodeTag[Decision]("eqdelete.native")
}
