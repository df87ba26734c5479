package eqdelete.maintain

import org.apache.spark.sql.eqdelete.compat.EqDeleteConf

/**
 * What a round of maintain does to a table, decided from metadata in this one place: resolve
 * once enough equality delete files are live (the table's `min-equality-delete-files`), compact
 * position delete files (format v2) once a reader of some data file opens the threshold's
 * number of them. A round decides compaction again after its resolve, which adds a file to each
 * data file of the partitions it touched; `status` counts that file in.
 */
final case class NextRound(resolve: Boolean, compact: Boolean, deferred: Option[String]) {
  /** In words, for `status`. */
  def describe(liveFiles: Int, liveRows: Long, positionDeleteFilesPerDataFile: Int): String = {
    val parts = Seq(
      if (resolve) Some(f"resolve $liveFiles%,d equality delete file(s), $liveRows%,d row(s)") else None,
      if (compact) Some(s"compact position delete files ($positionDeleteFilesPerDataFile per data file at most)") else None
    ).flatten
    (if (parts.isEmpty) "nothing" else parts.mkString(", then ")) + deferred.map(d => s" ($d)").getOrElse("")
  }
}

object NextRound {
  def of(settings: TableSettings, formatVersion: Int, liveEqualityDeleteFiles: Int, positionDeleteFilesPerDataFile: Int): NextRound = {
    val resolve = liveEqualityDeleteFiles > 0 && liveEqualityDeleteFiles >= settings.minEqualityDeleteFiles
    val deferred =
      if (liveEqualityDeleteFiles > 0 && !resolve) {
        Some(s"$liveEqualityDeleteFiles equality delete file(s) live < ${EqDeleteConf.TABLE_MAINTAIN_MIN_EQUALITY_DELETE_FILES.key}=" +
          s"${settings.minEqualityDeleteFiles}")
      } else None
    val afterResolve = positionDeleteFilesPerDataFile + (if (resolve) 1 else 0)
    NextRound(resolve, compacts(settings, formatVersion, afterResolve), deferred)
  }

  /** Whether a v2 table whose readers open `positionDeleteFilesPerDataFile` files is compacted. */
  def compacts(settings: TableSettings, formatVersion: Int, positionDeleteFilesPerDataFile: Int): Boolean =
    formatVersion == 2 && settings.compactPositionDeleteFiles > 0 &&
      positionDeleteFilesPerDataFile >= settings.compactPositionDeleteFiles
}
