package eqdelete.deleteindex

import eqdelete.planning.ScanDeletes

/**
 * What the filter's primitive index costs by itself, with no Spark around it: building it from
 * `n` delete keys and probing it with `n` data keys, half of them deleted, as the scale
 * benchmark's delete axis does (deletes of keys 1, 3, 5, ... on keys 0 .. n - 1). The lower
 * bound of any plan that hashes the delete keys in one table; PERFORMANCE.md quotes it.
 *
 * {{{scripts/sbt.sh "spark41/Test/runMain eqdelete.deleteindex.LongKeyIndexCost 10000000"}}}
 */
object LongKeyIndexCost {
  def main(args: Array[String]): Unit = {
    val n = args.headOption.map(_.toLong).getOrElse(10000000L)
    val rounds = 5
    val builds = Array.fill(rounds)(0.0)
    val orderedBuilds = Array.fill(rounds)(0.0)
    val probes = Array.fill(rounds)(0.0)
    val pairs = Array.fill(rounds)(0.0)
    var deleted = 0L
    for (round <- 0 until rounds) {
      var started = System.nanoTime()
      val index = new LongKeyIndex(n)
      var i = 0L
      while (i < n) { index.addBits(ScanDeletes.GlobalScope.toLong, 2 * i + 1, 2L); i += 1 }
      index.seal()
      builds(round) = (System.nanoTime() - started) / 1e9

      // The same keys as the read tasks ship them: ordered by home slot (timed with the ordering).
      started = System.nanoTime()
      val keys = Array.tabulate(n.toInt)(i => 2L * i + 1)
      LongKeyIndex.orderForInsert(keys, 0, keys.length, ScanDeletes.GlobalScope.toLong, n)
      val ordered = new LongKeyIndex(n)
      keys.foreach(k => ordered.addBits(ScanDeletes.GlobalScope.toLong, k, 2L))
      ordered.seal()
      orderedBuilds(round) = (System.nanoTime() - started) / 1e9

      started = System.nanoTime()
      deleted = probe(index, 0L, n)
      probes(round) = (System.nanoTime() - started) / 1e9

      // Two threads, each half of the keys: the scan's tasks on this machine's two cores.
      started = System.nanoTime()
      val half = new Thread(() => probe(index, n / 2, n))
      half.start()
      probe(index, 0L, n / 2)
      half.join()
      pairs(round) = (System.nanoTime() - started) / 1e9
    }
    def median(xs: Array[Double]) = xs.sorted.apply(xs.length / 2)
    println(f"LongKeyIndex, $n%,d delete keys, $n%,d probes ($deleted%,d deleted), median of $rounds rounds:")
    println(f"  build (one thread):  ${median(builds)}%.3f s  (${median(builds) * 1e9 / n}%.0f ns a key)")
    println(f"  build, keys in slot order (one thread, ordering included): ${median(orderedBuilds)}%.3f s")
    println(f"  probe (one thread):  ${median(probes)}%.3f s  (${median(probes) * 1e9 / n}%.0f ns a key)")
    println(f"  probe (two threads): ${median(pairs)}%.3f s")
    println(f"  table: ${LongKeyIndex.bytesFor(n) / 1e6}%.0f MB")
  }

  private def probe(index: LongKeyIndex, from: Long, until: Long): Long = {
    var found = 0L
    var key = from
    while (key < until) {
      if (index.newest(ScanDeletes.GlobalScope.toLong, isNull = false, key) != DeleteKeyIndex.NoDelete) found += 1
      key += 1
    }
    found
  }
}
