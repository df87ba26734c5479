package eqdelete.maintain

import scala.util.Random

import org.scalatest.funsuite.AnyFunSuite

/** The size tiers of a data file's own position delete files: what a compaction merges, and what that costs over many. */
class ScopedDeleteTiersSuite extends AnyFunSuite {

  test("files are taken smallest first while each is within the ratio of what is merged so far") {
    // 100 rows over 10 new with room for 5 files: a ratio of 10^(1/5), about 1.58.
    assert(ScopedDeleteTiers.toMerge(Vector(100L), newRows = 10, keepAtMost = 5).isEmpty)
    assert(ScopedDeleteTiers.toMerge(Vector(90L, 10L), newRows = 10, keepAtMost = 5) == Seq(1))
    assert(ScopedDeleteTiers.toMerge(Vector(100L, 20L, 15L), newRows = 10, keepAtMost = 5) == Seq(2, 1))
    assert(ScopedDeleteTiers.toMerge(Vector(40L, 20L, 10L), newRows = 10, keepAtMost = 5) == Seq(2, 1, 0))
    // With room for one more file only, the ratio is the whole history's: everything is merged.
    assert(ScopedDeleteTiers.toMerge(Vector(100L), newRows = 10, keepAtMost = 1) == Seq(0))
  }

  test("more are taken while the data file would keep more files than allowed") {
    assert(ScopedDeleteTiers.toMerge(Vector(10000L, 50L), newRows = 1, keepAtMost = 2) == Seq(1))
    assert(ScopedDeleteTiers.toMerge(Vector(10000L, 50L), newRows = 1, keepAtMost = 1) == Seq(1, 0))
    // No new positions: only an overfull data file is merged, and never one file into one.
    assert(ScopedDeleteTiers.toMerge(Vector(100L, 50L), newRows = 0, keepAtMost = 2).isEmpty)
    assert(ScopedDeleteTiers.toMerge(Vector(100L, 50L, 7L), newRows = 0, keepAtMost = 2) == Seq(2, 1))
    assert(ScopedDeleteTiers.toMerge(Vector(100L), newRows = 0, keepAtMost = 1).isEmpty)
    assert(ScopedDeleteTiers.toMerge(Vector.empty, newRows = 3, keepAtMost = 1).isEmpty)
  }

  test("over many compactions a data file keeps at most the allowed files, and a row is rewritten about keep * n^(1/keep) times") {
    val random = new Random(3)
    for (keep <- Seq(1, 2, 5)) {
      var files = Vector.empty[Long]
      var rewritten = 0L
      var written = 0L
      for (_ <- 1 to 2000) {
        val fresh = 1L + random.nextInt(100)
        val merged = ScopedDeleteTiers.toMerge(files, fresh, keep).toSet
        rewritten += merged.toSeq.map(files).sum
        written += fresh
        files = files.indices.filterNot(merged).map(files).toVector :+ (fresh + merged.toSeq.map(files).sum)
        assert(files.size <= keep)
      }
      // Rewriting everything each time costs n/2 rewrites a row; the tiers about keep * n^(1/keep).
      val perRow = rewritten.toDouble / written
      assert(perRow < 2 * keep * math.pow(2000, 1.0 / keep), (keep, perRow))
    }
  }

  test("the union of two ascending arrays keeps each position once") {
    assert(PositionDeleteCompaction.mergeDistinct(Array(1L, 3L, 3L, 7L), Array(0L, 3L, 8L)).toSeq == Seq(0L, 1L, 3L, 7L, 8L))
    assert(PositionDeleteCompaction.mergeDistinct(Array.emptyLongArray, Array(2L)).toSeq == Seq(2L))
    assert(PositionDeleteCompaction.mergeDistinct(Array.emptyLongArray, Array.emptyLongArray).isEmpty)
  }
}
