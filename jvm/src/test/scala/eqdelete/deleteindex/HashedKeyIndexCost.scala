package eqdelete.deleteindex

import eqdelete.planning.ScanDeletes

import org.apache.spark.unsafe.Platform
import org.apache.spark.unsafe.types.UTF8String

/**
 * What the filter's hashed index costs by itself, with no Spark around it: `n` string delete
 * keys (key-1, key-3, ..., or UUID strings: `Shape`) added as the read tasks ship them (hash,
 * packed bytes; in the order read, and ordered by home slot), then probed with `n` data keys
 * key-0 .. key-(n-1), half of them deleted: one at a time as the generated filter does (the hash,
 * the Bloom filter, the key packed, the table), batch by batch (`newestAll`), and in slot order.
 * The data keys lie off the heap, as Iceberg's vectorized reader leaves them. The scale
 * benchmark's string key at 10^7 x 10^7; PERFORMANCE.md and the scale notes quote it.
 *
 * {{{scripts/sbt.sh 'set spark41/Test/javaOptions += "-Xmx8g"' "spark41/Test/runMain eqdelete.deleteindex.HashedKeyIndexCost 10000000 [keys probed in slot order at once] [string|uuid]"}}}
 */
object HashedKeyIndexCost {
  private val Global = ScanDeletes.GlobalScope.toLong

  def main(args: Array[String]): Unit = {
    val n = args.headOption.map(_.toInt).getOrElse(10000000)
    args.drop(1).headOption.foreach(rows => FileRows = rows.toInt)
    args.drop(2).headOption.foreach { shape =>
      require(Set("string", "uuid").contains(shape), s"key shape string or uuid, not $shape")
      Shape = shape
    }
    val rounds = 5
    val (builds, orderedBuilds, probes, pairs) = (new Array[Double](rounds), new Array[Double](rounds), new Array[Double](rounds), new Array[Double](rounds))
    val (sortedProbes, sortedPairs) = (new Array[Double](rounds), new Array[Double](rounds))
    val (batchedProbes, batchedPairs) = (new Array[Double](rounds), new Array[Double](rounds))
    val (hashes, keys) = deleteKeys(n)
    val data = dataKeys(n)
    var deleted = 0L
    var bytes = 0L
    for (round <- 0 until rounds) {
      var started = System.nanoTime()
      add(new HashedKeyIndex(Seq(org.apache.spark.sql.types.StringType), n), hashes, keys).seal()
      builds(round) = (System.nanoTime() - started) / 1e9

      val order = HashedKeyIndex.insertOrder(hashes, 0, n, Global, n)
      val offsets = new Array[Int](n)
      var (i, at) = (0, 0)
      while (i < n) { offsets(i) = at; at += KeyBytes.LengthBytes + KeyBytes.readLength(keys, at); i += 1 }
      // The gather, as the read tasks do it before shipping (not timed: it runs on the executors).
      val orderedHashes = new Array[Long](n)
      val orderedKeys = new Array[Byte](keys.length)
      i = 0
      at = 0
      while (i < n) {
        val k = order(i)
        orderedHashes(i) = hashes(k)
        val length = KeyBytes.LengthBytes + KeyBytes.readLength(keys, offsets(k))
        System.arraycopy(keys, offsets(k), orderedKeys, at, length)
        at += length
        i += 1
      }
      started = System.nanoTime()
      // As the driver adds the tasks' batches: their records allocated exactly, then added.
      val sized = new HashedKeyIndex(Seq(org.apache.spark.sql.types.StringType), n)
      sized.reserveRecords(n, orderedKeys.length)
      val ordered = add(sized, orderedHashes, orderedKeys).seal()
      orderedBuilds(round) = (System.nanoTime() - started) / 1e9
      bytes = ordered.retainedBytes

      started = System.nanoTime()
      deleted = probe(ordered, data, 0, n)
      probes(round) = (System.nanoTime() - started) / 1e9

      pairs(round) = onTwoThreads(n, probe(ordered, data, _, _))

      started = System.nanoTime()
      val batchedFound = probeBatched(ordered, data, 0, n)
      batchedProbes(round) = (System.nanoTime() - started) / 1e9
      require(batchedFound == deleted, s"$batchedFound keys found batch by batch, $deleted one by one")

      batchedPairs(round) = onTwoThreads(n, probeBatched(ordered, data, _, _))

      started = System.nanoTime()
      val sortedFound = probeInSlotOrder(ordered, data, 0, n, n)
      sortedProbes(round) = (System.nanoTime() - started) / 1e9
      require(sortedFound == deleted, s"$sortedFound keys found in slot order, $deleted one by one")

      sortedPairs(round) = onTwoThreads(n, probeInSlotOrder(ordered, data, _, _, n))
    }
    def median(xs: Array[Double]) = xs.sorted.apply(xs.length / 2)
    val fills = fillFromTasks(n, rounds)
    println(f"HashedKeyIndex, $n%,d $Shape delete keys, $n%,d probes ($deleted%,d deleted), median of $rounds rounds:")
    println(f"  build, keys as read (one thread): ${median(builds)}%.3f s  (${median(builds) * 1e9 / n}%.0f ns a key)")
    println(f"  build, keys in slot order (one thread, the ordering on the tasks not included): ${median(orderedBuilds)}%.3f s")
    println(f"  probe (one thread):  ${median(probes)}%.3f s  (${median(probes) * 1e9 / n}%.0f ns a key)")
    println(f"  probe (two threads): ${median(pairs)}%.3f s")
    println(f"  probe batch by batch of $BatchRows%,d keys (newestAll; hashing and packing included; one thread): " +
      f"${median(batchedProbes)}%.3f s  (${median(batchedProbes) * 1e9 / n}%.0f ns a key)")
    println(f"  probe batch by batch (two threads): ${median(batchedPairs)}%.3f s")
    println(f"  probe by data file of $FileRows%,d keys in slot order (hashing and ordering included; one thread): " +
      f"${median(sortedProbes)}%.3f s  (${median(sortedProbes) * 1e9 / n}%.0f ns a key)")
    println(f"  probe by data file in slot order (two threads): ${median(sortedPairs)}%.3f s")
    println(f"  index: ${bytes / 1e6}%.0f MB")
    fills.foreach { case (threads, seconds) =>
      println(f"  fill from 10 tasks' batches as the driver does ($threads thread(s)): ${median(seconds)}%.3f s")
    }
  }

  /**
   * The keys' shape (the third argument): `string`, the scale benchmark's short strings (key-0,
   * key-1, ...), or `uuid`, 36-character UUID strings as upsert tables are keyed by (random
   * looking: the i-th is a mix of i, so data keys and delete keys interleave as `string`'s do).
   */
  private var Shape = "string"

  private def keyOf(i: Long): String =
    if (Shape == "uuid") new java.util.UUID(KeyHash.ofLong(KeyHash.Seed, i), KeyHash.ofLong(~KeyHash.Seed, i)).toString
    else s"key-$i"

  /**
   * Seconds the driver's fill takes on one thread and on two (`DeleteRowBatch.addAll`), per
   * round: the delete keys shipped by 10 tasks, ordered as they order them.
   */
  private def fillFromTasks(n: Int, rounds: Int): Seq[(Int, Array[Double])] = {
    val types = Seq(org.apache.spark.sql.types.StringType)
    val tasks = 10
    val batches = (0 until tasks).map { t =>
      val rows = (t.toLong * n / tasks until (t + 1L) * n / tasks).iterator.map { i =>
        org.apache.spark.sql.catalyst.InternalRow(UTF8String.fromString(keyOf(2L * i + 1)), Global, 2L)
      }
      build.DeleteRowBatch(rows, types, primitive = false, indexKeys = n)
    }
    Seq(1, 2).map { threads =>
      threads -> Array.fill(rounds) {
        val index = new HashedKeyIndex(types, n)
        val started = System.nanoTime()
        build.DeleteRowBatch.addAll(batches, index, threads)
        index.seal()
        val seconds = (System.nanoTime() - started) / 1e9
        require(index.distinctKeys == n, s"${index.distinctKeys} keys filled of $n")
        seconds
      }
    }
  }

  /** Seconds `probe` takes over keys 0 until `n`, each half on a thread of its own. */
  private def onTwoThreads(n: Int, probe: (Int, Int) => Long): Double = {
    val started = System.nanoTime()
    val half = new Thread(() => probe(n / 2, n))
    half.start()
    probe(0, n / 2)
    half.join()
    (System.nanoTime() - started) / 1e9
  }

  /** The delete keys (key-1, key-3, ... in `keyOf`'s shape) as a task ships them: hashes, and each key packed after its length. */
  private[deleteindex] def deleteKeys(n: Int): (Array[Long], Array[Byte]) = {
    val hashes = new Array[Long](n)
    val packed = new java.io.ByteArrayOutputStream()
    val key = new KeyBytes
    for (i <- 0 until n) {
      val s = UTF8String.fromString(keyOf(2L * i + 1))
      hashes(i) = KeyHash.of(Array[Any](s))
      KeyBytes.pack(Array(org.apache.spark.sql.types.StringType), Array[Any](s), key)
      val length = new Array[Byte](KeyBytes.LengthBytes)
      KeyBytes.writeLength(length, 0, key.length)
      packed.write(length)
      packed.write(key.bytes, 0, key.length)
    }
    (hashes, packed.toByteArray)
  }

  /** The data keys key-0 .. key-(n-1) (in `keyOf`'s shape), off the heap. */
  private[deleteindex] def dataKeys(n: Int): OffHeapStrings = OffHeapStrings((0 until n).map(i => keyOf(i)))

  private def add(index: HashedKeyIndex, hashes: Array[Long], keys: Array[Byte]): HashedKeyIndex = {
    var (i, at) = (0, 0)
    while (i < hashes.length) {
      val length = KeyBytes.readLength(keys, at)
      index.addPacked(hashes(i), Global, keys, at + KeyBytes.LengthBytes, length, 2L)
      at += KeyBytes.LengthBytes + length
      i += 1
    }
    index
  }

  /** As the generated filter probes: hash, Bloom filter, and only then the key packed and looked up. */
  private def probe(index: HashedKeyIndex, data: OffHeapStrings, from: Int, until: Int): Long =
    probeWith(data, from, until, index.mightContain, index.newest(Global, _, _))

  /**
   * How many of the data keys `from` until `until` `newest` finds a delete of, each hashed,
   * checked with `mightContain`, and only then packed, as the generated filter does.
   */
  private[deleteindex] def probeWith(data: OffHeapStrings, from: Int, until: Int, mightContain: Long => Boolean,
      newest: (Long, KeyBytes) => Long): Long = {
    val key = new KeyBytes
    var found = 0L
    var i = from
    while (i < until) {
      val s = data(i)
      val hash = KeyHash.ofString(KeyHash.Seed, s)
      if (mightContain(hash)) {
        key.reset()
        key.putUTF8String(s)
        if (newest(hash, key) != DeleteKeyIndex.NoDelete) found += 1
      }
      i += 1
    }
    found
  }

  /**
   * Keys looked up together: a part of a columnar batch of Iceberg's vectorized reader (5,000
   * rows by default). Measured 2026-12-06 at 10^7 string keys, one thread: 241 ns a key in
   * parts of 256, 261 of 1,024, 286 of 4,096 (the lookups' pages outgrow the TLB), against 518
   * one key at a time.
   */
  private val BatchRows = 256

  /**
   * As a scan would probe a columnar batch at a time (`HashedKeyIndex.newestAll`): the batch's
   * keys hashed and packed into one buffer, then looked up together. Returns how many were found.
   */
  private def probeBatched(index: HashedKeyIndex, data: OffHeapStrings, from: Int, until: Int): Long = {
    val key = new KeyBytes
    val hashes = new Array[Long](BatchRows)
    val offsets = new Array[Int](BatchRows + 1)
    val (out, entries) = (new Array[Long](BatchRows), new Array[Long](BatchRows))
    var found = 0L
    var start = from
    while (start < until) {
      val n = math.min(BatchRows, until - start)
      key.reset()
      var i = 0
      while (i < n) {
        val s = data(start + i)
        hashes(i) = KeyHash.ofString(KeyHash.Seed, s)
        offsets(i) = key.length
        key.putUTF8String(s)
        i += 1
      }
      offsets(n) = key.length
      index.newestAll(Global, hashes, key.bytes, offsets, n, out, entries)
      i = 0
      while (i < n) { if (out(i) != DeleteKeyIndex.NoDelete) found += 1; i += 1 }
      start += n
    }
    found
  }

  /**
   * Keys probed in slot order at once: a data file's rows, as the scale benchmark's tables have
   * them (the second argument: more, as a read task gathering several files' keys would).
   */
  private var FileRows = 1000000

  /**
   * The probe a partitioned plan would make (PERFORMANCE.md): per data file, every key hashed,
   * the file's positions ordered by the key's home slot (`HashedKeyIndex.insertOrder`, as the
   * read tasks order delete keys), then looked up in that order, so the lookups walk the table
   * front to back where one by one each missed the cache; the deleted positions set in a bit
   * set per file, as they would be handed to the scan. Returns how many were found.
   */
  private def probeInSlotOrder(index: HashedKeyIndex, data: OffHeapStrings, from: Int, until: Int, indexKeys: Long): Long = {
    val key = new KeyBytes
    var found = 0L
    var start = from
    while (start < until) {
      val end = math.min(until, start + FileRows)
      val hashes = new Array[Long](end - start)
      var i = 0
      while (i < hashes.length) { hashes(i) = KeyHash.ofString(KeyHash.Seed, data(start + i)); i += 1 }
      val order = HashedKeyIndex.insertOrder(hashes, 0, hashes.length, Global, indexKeys)
      val deleted = new java.util.BitSet(hashes.length)
      i = 0
      while (i < order.length) {
        val position = order(i)
        val hash = hashes(position)
        if (index.mightContain(hash)) {
          key.reset()
          key.putUTF8String(data(start + position))
          if (index.newest(Global, hash, key) != DeleteKeyIndex.NoDelete) deleted.set(position)
        }
        i += 1
      }
      found += deleted.cardinality()
      start = end
    }
    found
  }

  /** Strings in one off-heap buffer, read as UTF8Strings pointing into it (a column vector's way). */
  private[deleteindex] final class OffHeapStrings(address: Long, offsets: Array[Int]) {
    def apply(i: Int): UTF8String = UTF8String.fromAddress(null, address + offsets(i), offsets(i + 1) - offsets(i))
  }

  private object OffHeapStrings {
    def apply(values: Seq[String]): OffHeapStrings = {
      val bytes = values.map(_.getBytes(java.nio.charset.StandardCharsets.UTF_8))
      val offsets = bytes.scanLeft(0)(_ + _.length).toArray
      val address = Platform.allocateMemory(offsets.last.toLong)
      bytes.zipWithIndex.foreach { case (b, i) =>
        Platform.copyMemory(b, Platform.BYTE_ARRAY_OFFSET, null, address + offsets(i), b.length)
      }
      new OffHeapStrings(address, offsets)
    }
  }
}
