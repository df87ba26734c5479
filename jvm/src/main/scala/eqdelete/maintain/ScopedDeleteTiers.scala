package eqdelete.maintain

/**
 * Which of a data file's own (file-scoped) position delete files a compaction merges with the
 * positions new to it, so that a compaction's cost follows the new deletes rather than all the
 * data file's deletes, while the data file keeps at most `keepAtMost` files (what its reader opens).
 *
 * Files are taken smallest first while each holds at most `ratio` times the rows merged so far,
 * `ratio` the `keepAtMost`-th root of the data file's deleted rows over the new ones, and then
 * while the data file would keep too many: the logarithmic method's levels, their ratio adapted
 * to the size. Over n compactions a row is rewritten about keepAtMost * n^(1/keepAtMost) times
 * (ScopedDeleteTiersSuite), near the least any layout of that many files allows; rewriting all
 * of them each time, as Iceberg's rewrite_position_delete_files does, costs n/2.
 */
object ScopedDeleteTiers {

  /**
   * The files to merge, as indices of `rows` (each file's row count, in any order), given
   * `newRows` positions new to the data file. Nothing when the merge would only copy one file.
   */
  def toMerge(rows: IndexedSeq[Long], newRows: Long, keepAtMost: Int): Seq[Int] = {
    require(keepAtMost >= 1, s"keepAtMost must be at least 1, not $keepAtMost")
    val ratio = if (newRows <= 0) 1.0 else math.max(1.0, math.pow(rows.sum.toDouble / newRows, 1.0 / keepAtMost))
    val ascending = rows.indices.sortBy(rows)
    var merged = newRows
    val chosen = ascending.iterator.zipWithIndex.takeWhile { case (i, taken) =>
      val left = rows.size - taken  // not merged yet, this one included
      val take = rows(i) <= ratio * merged || left + (if (newRows > 0 || taken > 0) 1 else 0) > keepAtMost
      if (take) merged += rows(i)
      take
    }.map(_._1).toVector
    if (newRows == 0 && chosen.size <= 1) Nil else chosen
  }
}
