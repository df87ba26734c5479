package eqdelete.deleteindex

import eqdelete.deleteindex.HashedKeyIndexCost.OffHeapStrings

/**
 * What a plan that finds each data file's deleted positions by merging, not probing, would cost
 * in memory work alone (PERFORMANCE.md, scale: the hashed index at 10^7 delete rows). The same
 * `n` string delete keys and `n` data keys as [[HashedKeyIndexCost]] (half of the data keys
 * deleted), and no Spark around them:
 *
 *  - the build: the delete keys (hash, packed bytes) ordered by hash in parts of 10^6, as each
 *    read task would order its own, and the parts merged in one order, as the driver would;
 *  - per data file of 10^6 keys: every key hashed where it lies off the heap (as Iceberg's
 *    vectorized reader leaves a column), the file's positions ordered by hash, one merge walk
 *    along the ordered delete keys, each equal hash's bytes compared, the deleted positions set
 *    in a bit set per file (what a scan would skip).
 *
 * Every access walks forward through memory (the file's own keys stay in cache), where a probe
 * of a hash table past the cache missed it once or twice a key. No plan does this yet; it is
 * measured before it is built, as `BatchedProbeCost` was.
 *
 * {{{scripts/sbt.sh 'set spark41/Test/javaOptions += "-Xmx8g"' "spark41/Test/runMain eqdelete.deleteindex.SortedMergeCost 10000000"}}}
 */
object SortedMergeCost {
  private val FileRows = 1000000

  def main(args: Array[String]): Unit = {
    val n = args.headOption.map(_.toInt).getOrElse(10000000)
    val rounds = 5
    val (partBuilds, builds) = (new Array[Double](rounds), new Array[Double](rounds))
    val (merges, pairs) = (new Array[Double](rounds), new Array[Double](rounds))
    val (hashOnly, hashOnlyPairs) = (new Array[Double](rounds), new Array[Double](rounds))
    val (hashes, keys) = HashedKeyIndexCost.deleteKeys(n)
    val data = HashedKeyIndexCost.dataKeys(n)
    var (found, byHashAlone) = (0L, 0L)
    for (round <- 0 until rounds) {
      var started = System.nanoTime()
      val parts = OrderedDeletes.parts(hashes, keys)
      partBuilds(round) = (System.nanoTime() - started) / 1e9
      started = System.nanoTime()
      val deletes = OrderedDeletes.merged(parts)
      builds(round) = (System.nanoTime() - started) / 1e9

      started = System.nanoTime()
      found = deletedIn(deletes, data, 0, n, verify = true)
      merges(round) = (System.nanoTime() - started) / 1e9
      require(found == n / 2, s"$found of ${n / 2} deleted keys found")

      def onTwoThreads(expected: Long)(find: (Int, Int) => Long): Double = {
        val started = System.nanoTime()
        var other = 0L
        val half = new Thread(() => other = find(n / 2, n))
        half.start()
        val first = find(0, n / 2)
        half.join()
        require(first + other == expected, s"${first + other} found on two threads, $expected on one")
        (System.nanoTime() - started) / 1e9
      }
      pairs(round) = onTwoThreads(found)(deletedIn(deletes, data, _, _, verify = true))

      started = System.nanoTime()
      byHashAlone = deletedIn(deletes, data, 0, n, verify = false)
      hashOnly(round) = (System.nanoTime() - started) / 1e9
      hashOnlyPairs(round) = onTwoThreads(byHashAlone)(deletedIn(deletes, data, _, _, verify = false))
    }
    def median(xs: Array[Double]) = xs.sorted.apply(xs.length / 2)
    println(f"Sorted merge, $n%,d string delete keys, $n%,d data keys ($found%,d deleted) in files of $FileRows%,d, median of $rounds rounds:")
    println(f"  the delete keys ordered by hash in parts of $PartKeys%,d, as read tasks would (one thread): ${median(partBuilds)}%.3f s")
    println(f"  the parts merged into one order, as the driver would (one thread): ${median(builds)}%.3f s")
    println(f"  deleted positions, file by file (hash, order, merge; one thread): ${median(merges)}%.3f s  (${median(merges) * 1e9 / n}%.0f ns a key)")
    println(f"  deleted positions (two threads): ${median(pairs)}%.3f s")
    println(f"  by equal hashes alone, no key compared (not exact: $byHashAlone%,d found; one thread): ${median(hashOnly)}%.3f s  " +
      f"(${median(hashOnly) * 1e9 / n}%.0f ns a key); two threads: ${median(hashOnlyPairs)}%.3f s")
  }

  /** Delete keys a read task ships: as the scale benchmark's delete files hold them. */
  private val PartKeys = 1000000

  /**
   * The delete keys ordered by their hash, with their packed bytes (each after its length, from
   * `offsets(i)`) in the same order: as each read task would order its own keys (`parts`, timed
   * apart: it runs on the executors) and the driver merge the ordered parts.
   */
  final class OrderedDeletes(val hashes: Array[Long], val bytes: Array[Byte], val offsets: Array[Int])

  object OrderedDeletes {
    /** Each part of `PartKeys` keys ordered by hash, as a task ships it. */
    def parts(hashes: Array[Long], packed: Array[Byte]): Seq[OrderedDeletes] = {
      val from = offsetsOf(packed, hashes.length)
      (0 until hashes.length by PartKeys).map { start =>
        val end = math.min(hashes.length, start + PartKeys)
        val order = byHash(java.util.Arrays.copyOfRange(hashes, start, end))
        gather(order.length, i => start + order(i), hashes, packed, from)
      }
    }

    /** The parts merged into one order on the driver: each part read front to back. */
    def merged(parts: Seq[OrderedDeletes]): OrderedDeletes = {
      val at = new Array[Int](parts.size)
      val total = parts.map(_.hashes.length).sum
      val hashes = new Array[Long](total)
      val bytes = new Array[Byte](parts.map(_.bytes.length).sum)
      val offsets = new Array[Int](total + 1)
      var (i, end) = (0, 0)
      while (i < total) {
        var best = -1
        var p = 0
        while (p < parts.size) {
          if (at(p) < parts(p).hashes.length &&
            (best < 0 || java.lang.Long.compareUnsigned(parts(p).hashes(at(p)), parts(best).hashes(at(best))) < 0)) best = p
          p += 1
        }
        val part = parts(best)
        val k = at(best)
        hashes(i) = part.hashes(k)
        val length = part.offsets(k + 1) - part.offsets(k)
        System.arraycopy(part.bytes, part.offsets(k), bytes, end, length)
        offsets(i) = end
        end += length
        at(best) += 1
        i += 1
      }
      offsets(total) = end
      new OrderedDeletes(hashes, bytes, offsets)
    }

    private def offsetsOf(packed: Array[Byte], n: Int): Array[Int] = {
      val from = new Array[Int](n + 1)
      var i = 0
      while (i < n) { from(i + 1) = from(i) + KeyBytes.LengthBytes + KeyBytes.readLength(packed, from(i)); i += 1 }
      from
    }

    private def gather(n: Int, source: Int => Int, hashes: Array[Long], packed: Array[Byte], from: Array[Int]): OrderedDeletes = {
      val ordered = new Array[Long](n)
      val offsets = new Array[Int](n + 1)
      var i = 0
      while (i < n) { val k = source(i); offsets(i + 1) = offsets(i) + from(k + 1) - from(k); i += 1 }
      val bytes = new Array[Byte](offsets(n))
      i = 0
      while (i < n) {
        val k = source(i)
        ordered(i) = hashes(k)
        System.arraycopy(packed, from(k), bytes, offsets(i), from(k + 1) - from(k))
        i += 1
      }
      new OrderedDeletes(ordered, bytes, offsets)
    }
  }

  /**
   * Positions 0 until `hashes.length` ordered by hash (unsigned; by the upper 32 bits, ties in
   * any order): each (upper 32 bits, position) one long, three passes of an 11-bit radix sort
   * reading and writing longs front to back, where sorting positions read a hash at random.
   */
  private def byHash(hashes: Array[Long]): Array[Int] = {
    val n = hashes.length
    var in = new Array[Long](n)
    var out = new Array[Long](n)
    var i = 0
    while (i < n) { in(i) = (hashes(i) & 0xFFFFFFFF00000000L) | i; i += 1 }
    for (shift <- Seq(32, 43, 54)) {
      val starts = new Array[Int](2049)
      i = 0
      while (i < n) { starts(((in(i) >>> shift) & 0x7FF).toInt + 1) += 1; i += 1 }
      var d = 0
      while (d < 2048) { starts(d + 1) += starts(d); d += 1 }
      i = 0
      while (i < n) {
        val digit = ((in(i) >>> shift) & 0x7FF).toInt
        out(starts(digit)) = in(i)
        starts(digit) += 1
        i += 1
      }
      val swap = in; in = out; out = swap
    }
    val order = new Array[Int](n)
    i = 0
    while (i < n) { order(i) = (in(i) & 0xFFFFFFFFL).toInt; i += 1 }
    order
  }

  /**
   * How many of data keys `from` until `until` are deleted, found file by file; without `verify`,
   * by equal hashes alone (a lower bound of the merge's own cost: a string's hash has the 32 bits
   * of its `hashCode`, so at 10^7 keys some 10^4 differing keys share one).
   */
  private def deletedIn(deletes: OrderedDeletes, data: OffHeapStrings, from: Int, until: Int, verify: Boolean): Long = {
    var (found, byHashAlone) = (0L, 0L)
    var start = from
    while (start < until) {
      val end = math.min(until, start + FileRows)
      found += deletedInFile(deletes, data, start, end, verify).cardinality()
      start = end
    }
    found
  }

  /**
   * One data file's deleted positions: its keys hashed, ordered by hash, and merged with the
   * deletes' (galloping over the runs of delete keys between two data keys).
   */
  private def deletedInFile(deletes: OrderedDeletes, data: OffHeapStrings, start: Int, end: Int, verify: Boolean): java.util.BitSet = {
    val rows = end - start
    val hashes = new Array[Long](rows)
    var i = 0
    while (i < rows) { hashes(i) = KeyHash.ofString(KeyHash.Seed, data(start + i)); i += 1 }
    val order = byHash(hashes)
    val deleted = new java.util.BitSet(rows)
    val ordered = deletes.hashes
    val n = ordered.length
    var d = 0 // the first delete key whose upper hash is not below the current data key's
    i = 0
    while (i < rows) {
      val position = order(i)
      val hash = hashes(position)
      val u = hash >>> 32
      if (d < n && (ordered(d) >>> 32) < u) {
        var step = 1
        while (d + step < n && (ordered(d + step) >>> 32) < u) step <<= 1
        var (lo, hi) = (d + (step >>> 1), math.min(n, d + step))
        while (lo < hi) { val mid = (lo + hi) >>> 1; if ((ordered(mid) >>> 32) < u) lo = mid + 1 else hi = mid }
        d = lo
      }
      // Every delete key of the same upper hash: usually none or one.
      var e = d
      while (e < n && (ordered(e) >>> 32) == u) {
        if (ordered(e) == hash && (!verify || sameKey(deletes, e, data, start + position))) {
          deleted.set(position)
          e = n
        } else e += 1
      }
      i += 1
    }
    deleted
  }

  private def sameKey(deletes: OrderedDeletes, e: Int, data: OffHeapStrings, row: Int): Boolean = {
    val s = data(row)
    // A string key packs as a non-NULL tag, its length and its UTF-8 bytes (KeyBytes): compare
    // those bytes with the column's where it holds them.
    val at = deletes.offsets(e) + KeyBytes.LengthBytes + 1
    val length = KeyBytes.readLength(deletes.bytes, at)
    length == s.numBytes() &&
      s.equals(org.apache.spark.unsafe.types.UTF8String.fromBytes(deletes.bytes, at + KeyBytes.LengthBytes, length))
  }
}
