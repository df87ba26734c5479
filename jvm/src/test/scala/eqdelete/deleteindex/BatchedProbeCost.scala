package eqdelete.deleteindex

/**
 * How much of a probe's time is waiting on memory, and how much a batched probe would win back:
 * a table laid out as [[LongKeyIndex]] lays out its slots (two longs a slot, linear probing, the
 * same home-slot hash) filled with `n` odd keys, probed with keys 0 .. n - 1 (half deleted), first
 * one key at a time as the filter's row-by-row expression does, then a batch at a time: every
 * key's home slot loaded first (independent loads the CPU overlaps), then each key resolved.
 * Measures the hardware, not eqdelete: no plan probes in batches today (PERFORMANCE.md, scale).
 *
 * {{{scripts/sbt.sh "spark41/Test/runMain eqdelete.deleteindex.BatchedProbeCost 10000000"}}}
 */
object BatchedProbeCost {
  private val Empty = 0L

  def main(args: Array[String]): Unit = {
    val n = args.headOption.map(_.toInt).getOrElse(10000000)
    val capacity = math.ceil(n / 0.65).toInt + 1
    val slots = new Array[Long](2 * capacity)
    var k = 0
    while (k < n) { insert(slots, capacity, 2L * k + 1); k += 1 }

    val rounds = 5
    val single = Array.fill(rounds)(0.0)
    val batched = Array.fill(rounds)(0.0)
    var found1, found2 = 0L
    for (round <- 0 until rounds) {
      var started = System.nanoTime()
      found1 = probeEach(slots, capacity, n)
      single(round) = (System.nanoTime() - started) / 1e9
      started = System.nanoTime()
      found2 = probeBatched(slots, capacity, n, 1024)
      batched(round) = (System.nanoTime() - started) / 1e9
    }
    require(found1 == found2 && found1 == n / 2, s"$found1 $found2")
    def median(xs: Array[Double]) = xs.sorted.apply(xs.length / 2)
    println(f"$n%,d keys in a ${16L * capacity / 1e6}%.0f MB table, $n%,d probes ($found1%,d found), one thread, median of $rounds:")
    println(f"  one key at a time:      ${median(single)}%.3f s (${median(single) * 1e9 / n}%.0f ns a probe)")
    println(f"  1,024 keys at a time:   ${median(batched)}%.3f s (${median(batched) * 1e9 / n}%.0f ns a probe)")
  }

  private def homeSlot(key: Long, capacity: Int): Int = {
    var h = key * 0x9E3779B97F4A7C15L
    h ^= h >>> 29
    h *= 0xBF58476D1CE4E5B9L
    (((h ^ (h >>> 32)) >>> 32) * capacity >>> 32).toInt
  }

  private def insert(slots: Array[Long], capacity: Int, key: Long): Unit = {
    var i = homeSlot(key, capacity)
    while (slots(2 * i + 1) != Empty) i = if (i + 1 == capacity) 0 else i + 1
    slots(2 * i) = key
    slots(2 * i + 1) = 1L
  }

  private def lookupFrom(slots: Array[Long], capacity: Int, key: Long, home: Int): Boolean = {
    var i = home
    while (true) {
      if (slots(2 * i + 1) == Empty) return false
      if (slots(2 * i) == key) return true
      i = if (i + 1 == capacity) 0 else i + 1
    }
    false
  }

  private def probeEach(slots: Array[Long], capacity: Int, n: Int): Long = {
    var found = 0L
    var key = 0L
    while (key < n) {
      if (lookupFrom(slots, capacity, key, homeSlot(key, capacity))) found += 1
      key += 1
    }
    found
  }

  private def probeBatched(slots: Array[Long], capacity: Int, n: Int, batch: Int): Long = {
    val homes = new Array[Int](batch)
    var touched = 0L
    var found = 0L
    var start = 0
    while (start < n) {
      val size = math.min(batch, n - start)
      var j = 0
      // Independent loads, no branch on what they load: the CPU keeps many misses in flight.
      while (j < size) {
        val home = homeSlot(start + j, capacity)
        homes(j) = home
        touched += slots(2 * home + 1)
        j += 1
      }
      j = 0
      while (j < size) {
        if (lookupFrom(slots, capacity, start + j, homes(j))) found += 1
        j += 1
      }
      start += size
    }
    if (touched == Long.MinValue) println(touched) // keeps the loads
    found
  }
}
