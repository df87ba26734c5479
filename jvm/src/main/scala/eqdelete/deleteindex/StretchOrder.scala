package eqdelete.deleteindex

/**
 * The order in which keys fill a table front to back: by the stretch (the upper 16 bits) of
 * their home slot. Within one of those 65,536 stretches order does not matter, as it stays in
 * cache, so two passes of a radix sort, a byte each, do it.
 */
private[deleteindex] object StretchOrder {
  /** The stable permutation of positions `0 until n` by `stretches`: the i-th in order is position `result(i)`. */
  def of(stretches: Array[Char], n: Int): Array[Int] = {
    // Pass one: positions by the stretch's low byte; pass two: those, stably, by its high byte.
    val byLow = new Array[Int](n)
    val order = new Array[Int](n)
    def pass(in: Array[Int], out: Array[Int], shiftBy: Int): Unit = {
      val starts = new Array[Int](257)
      var i = 0
      while (i < n) { starts(((stretches(if (in == null) i else in(i)) >>> shiftBy) & 0xFF) + 1) += 1; i += 1 }
      var b = 0
      while (b < 256) { starts(b + 1) += starts(b); b += 1 }
      i = 0
      while (i < n) {
        val at = if (in == null) i else in(i)
        val digit = (stretches(at) >>> shiftBy) & 0xFF
        out(starts(digit)) = at
        starts(digit) += 1
        i += 1
      }
    }
    pass(null, byLow, 0)
    pass(byLow, order, 8)
    order
  }

  /**
   * The (first, end) stretches of at most `parts` regions of whole stretches of `stretches`, one
   * region where `whole`: what threads fill at once, each its own.
   */
  def regions(parts: Int, stretches: Int, whole: Boolean): IndexedSeq[(Int, Int)] = {
    val n = if (whole) 1 else math.min(parts, stretches)
    (0 until n).map(k => ((k.toLong * stretches / n).toInt, ((k + 1).toLong * stretches / n).toInt))
  }
}
