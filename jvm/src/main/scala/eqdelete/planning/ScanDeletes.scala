package eqdelete.planning

import eqdelete.deleteindex.DeleteKeyIndex

import org.apache.iceberg.DeleteFile

/** One equality delete file, with what the rewrite needs to apply it without Iceberg. */
final case class EqualityDeleteRef(file: DeleteFile, scope: Int, sequenceNumber: Long) {
  def isGlobal: Boolean = scope == ScanDeletes.GlobalScope
}

/**
 * Delete files sharing one `equality_ids` set, and the key columns they name: each a path of
 * field names from a top-level column down through structs (`Seq("s", "a")` for `s.a`).
 * `promotedKeys` names the key columns whose values changed class in the table's history
 * ([[KeyTypeHistory]]).
 */
final case class EqualityDeleteSet(equalityIds: Seq[Int], keyPaths: Seq[Seq[String]], files: Seq[EqualityDeleteRef],
    promotedKeys: Seq[String] = Nil) {
  def records: Long = files.map(_.file.recordCount()).sum
  def newestSequenceNumber: Long = files.map(_.sequenceNumber).max
  /** The key columns as Iceberg names them (`s.a` for a nested field). */
  def keyColumns: Seq[String] = keyPaths.map(_.mkString("."))
  def describeKeys: String = keyColumns.mkString("(", ", ", ")")
  def hasNestedKeys: Boolean = keyPaths.exists(_.size > 1)

  /**
   * Whether some delete row may hold NULL in the i-th key column, from the files' null-value
   * counts; a file without that metric may. When none can, NULL-safe equality is plain equality.
   */
  def keyMayBeNull(i: Int): Boolean = files.exists { ref =>
    val counts = ref.file.nullValueCounts()
    val count = if (counts == null) null else counts.get(Integer.valueOf(equalityIds(i)))
    count == null || count.longValue() > 0
  }
}

/**
 * What Iceberg's own planning says about one scan: every planned data file with its data
 * sequence number and partition scope, how many files and rows carry equality deletes and how
 * many do not, and the equality delete files grouped by `equality_ids`.
 *
 * The rewrite applies a delete file D to a row of data file F when their keys match (NULL
 * equals NULL), D's scope is F's scope or global, and `seq(F) < seq(D)`: Iceberg's rule,
 * checked against Iceberg's own per-file assignment before the plan is used.
 *
 * @param assignmentMayMiss why Iceberg's per-file assignment may leave out a delete that
 *                          applies (then every planned file gets the deletes), if it may
 */
final case class ScanDeletes(
    snapshotId: Long,
    dataFileScopes: DataFileScopes,
    dataFilesWithDeletes: Int,
    rowsWithDeletes: Long,
    rowsWithoutDeletes: Long,
    deleteSets: Seq[EqualityDeleteSet],
    scan: PlannedTasks,
    assignmentMayMiss: Option[String] = None) {
  def deleteFiles: Int = deleteSets.map(_.files.size).sum
  def deleteRecords: Long = deleteSets.map(_.records).sum
  def dataFiles: Int = dataFileScopes.size
  def dataFilesWithoutDeletes: Int = dataFiles - dataFilesWithDeletes

  /** The same plan applying only the delete files `keep` accepts (sets left empty are dropped). */
  def onlyDeletes(keep: EqualityDeleteRef => Boolean): ScanDeletes =
    copy(deleteSets = deleteSets.map(set => set.copy(files = set.files.filter(keep))).filter(_.files.nonEmpty))

  /**
   * Why Iceberg's own reader would read this scan wrongly, if it would: then eqdelete never
   * leaves it native by choice (docs/known-iceberg-issues.md).
   */
  def nativeIsWrong: Option[String] = {
    val nested = deleteSets.find(_.hasNestedKeys).map(set => KnownMisreads.nestedKey(set.describeKeys))
    val promoted = deleteSets.find(_.promotedKeys.nonEmpty).map { set =>
      s"the key's type was promoted (${set.promotedKeys.mkString(", ")}), and Iceberg's own reader may serve delete " +
        "rows it cached with the old type, which match nothing"
    }
    nested.orElse(promoted).orElse(assignmentMayMiss)
  }
}

object ScanDeletes {
  /** The scope of a delete file written under an unpartitioned spec: every partition (an index's global scope). */
  val GlobalScope: Int = DeleteKeyIndex.GlobalScope
}
