package eqdelete.deleteindex.build

import eqdelete.deleteindex.{DeleteKeyIndex, HashedKeyIndex, KeyBytes, LongKeyIndex, TwoLongKeyIndex}

/**
 * Adds the batches a query's read tasks shipped to the index made for them, in one pass over its
 * table, stretch by stretch: each batch's runs come ordered by stretch ([[DeleteRowBatch]]'s
 * builders order them), so every stretch of the table is filled once, while it is in cache.
 */
object DeleteRowBatchFilling {
  /**
   * Adds `batches` to `index` (the table `DeleteKeyIndex.forKeyTypes` made for them) in one pass
   * over its table, on up to `threads` threads.
   */
  def addAll(batches: Seq[DeleteRowBatch], index: DeleteKeyIndex, threads: Int): Unit = index match {
    case longs: LongKeyIndex => addInSlotOrder(batches, longs, threads)
    case hashed: HashedKeyIndex => addInSlotOrder(batches, hashed, threads)
    case pairs: TwoLongKeyIndex => addInSlotOrder(batches, pairs, threads)
    case other => throw new IllegalArgumentException(s"no delete row batches are added to $other")
  }

  /**
   * Adds `batches` to a primitive index in one pass over its table, stretch by stretch: each
   * batch's runs come ordered by stretch (see `apply`). Added batch by batch, each batch walked
   * the whole table again, a cache miss a key once the table outgrows the cache: at 3x10^7 keys
   * in 30 batches, that took the driver 1.4 s (the scale benchmark's delete axis).
   *
   * Up to `threads` threads fill the table at once, each its own region of stretches
   * (`LongKeyIndex.regions`): at 10^7 keys one thread took 0.38 s, the driver's longest wait
   * between reading the deletes and reading the data. A key out of order (batches ordered for an
   * index of another size) makes it one thread, and is added with the keys before it, never left out.
   */
  def addInSlotOrder(batches: Seq[DeleteRowBatch], index: LongKeyIndex, threads: Int): Unit = {
    val runs = new Runs(batches)
    import runs.{ends, keys, scopes, sequences, starts}
    val ordered = batches.forall(_.orderedFor == index.sizedFor)
    val total = keys.indices.map(r => (ends(r) - starts(r)).toLong).sum
    val regions = index.regions(if (ordered) threads else 1, total, scopes.zip(sequences).distinct.toSeq)

    def firstIn(r: Int, stretch: Int): Int =
      firstOfRunIn(runs, r, stretch, LongKeyIndex.Stretches, (r, at) => index.stretchOf(keys(r)(at), scopes(r)))

    def fill(region: LongKeyIndex.Region): Unit =
      inStretchOrder(keys.indices.map(firstIn(_, region.firstStretch)).toArray, keys.indices.map(firstIn(_, region.endStretch)).toArray,
        region.firstStretch, region.endStretch, new StretchRuns {
          def stretchAt(r: Int, at: Int): Int = index.stretchOf(keys(r)(at), scopes(r))
          def addThrough(r: Int, from: Int, end: Int, stretch: Int): Int = {
            val runKeys = keys(r)
            val scope = scopes(r)
            val seq = sequences(r)
            var at = from
            while (at < end && index.stretchOf(runKeys(at), scope) <= stretch) {
              region.add(scope, runKeys(at), seq)
              at += 1
            }
            at
          }
        })

    inParallel(regions.map(region => () => fill(region)))
    index.absorb(regions)
    batches.foreach(_.addNullKeysTo(index))
  }

  /**
   * Adds `batches` to a hashed index in one pass over its table, stretch by stretch, as the
   * primitive index's `addInSlotOrder`, on up to `threads` threads, each its own region of
   * stretches and its own bytes of the records (`HashedKeyIndex.regions`): at 10^7 UUID strings
   * one thread took ~0.4 s, while the other core waited. Added batch by batch as they arrived,
   * each task's keys walked the whole table again, 10^6 keys over 3x10^7 slots, a cache miss a
   * key: at 10^7 string keys in 10 tasks, more of the query's thread (`HashedKeyIndex.place`)
   * than the read tasks took of theirs, while they wanted both cores.
   */
  def addInSlotOrder(batches: Seq[DeleteRowBatch], index: HashedKeyIndex, threads: Int): Unit = {
    index.reserveRecords(batches.map(_.keys.length.toLong).sum, batches.map(_.packed.length.toLong).sum)
    val runs = new Runs(batches)
    import runs.{ends, scopes, sequences, starts, keys => hashes}
    val packed = runs.batches.map(_.packed)
    val ordered = batches.forall(_.orderedFor == index.sizedFor)
    val bounds = index.regionBounds(if (ordered) threads else 1, starts.indices.map(r => (ends(r) - starts(r)).toLong).sum)

    // Per run and bound, its first key in that stretch or later, and where that key's length and
    // bytes start in its batch's packed keys.
    val keyAt = starts.indices.map(r => bounds.map(firstOfRunIn(runs, r, _, HashedKeyIndex.Stretches,
      (r, at) => index.stretchOf(hashes(r)(at), scopes(r)))).toArray).toArray
    val bytesAt = Array.ofDim[Int](starts.length, bounds.length)
    for (r <- starts.indices) {
      var at = if (starts(r) == 0) 0 else bytesAt(r - 1)(bounds.length - 1)
      for (b <- bounds.indices) {
        at = skipKeys(packed(r), at, keyAt(r)(b) - (if (b == 0) starts(r) else keyAt(r)(b - 1)))
        bytesAt(r)(b) = at
      }
    }
    // A region's records: each key's header beside its length and bytes as shipped.
    val recordBytes = bounds.indices.init.map { b =>
      starts.indices.map { r =>
        (keyAt(r)(b + 1) - keyAt(r)(b)).toLong * HashedKeyIndex.RecordHeaderBytes + bytesAt(r)(b + 1) - bytesAt(r)(b)
      }.sum
    }
    val regions = index.regions(bounds, recordBytes, scopes.zip(sequences).distinct.toSeq)

    // The keys between bounds `b` and `end` into `region`.
    def fill(region: HashedKeyIndex.Region, b: Int, end: Int): Unit = {
      val packedAt = bytesAt.map(_(b))
      inStretchOrder(keyAt.map(_(b)), keyAt.map(_(end)), bounds(b), bounds(end), new StretchRuns {
        def stretchAt(r: Int, at: Int): Int = index.stretchOf(hashes(r)(at), scopes(r))
        def addThrough(r: Int, from: Int, end: Int, stretch: Int): Int = {
          val runHashes = hashes(r)
          val runPacked = packed(r)
          val scope = scopes(r)
          val seq = sequences(r)
          var at = from
          var byteAt = packedAt(r)
          while (at < end && index.stretchOf(runHashes(at), scope) <= stretch) {
            val length = KeyBytes.readLength(runPacked, byteAt)
            region.add(runHashes(at), scope, runPacked, byteAt + KeyBytes.LengthBytes, length, seq)
            byteAt += KeyBytes.LengthBytes + length
            at += 1
          }
          packedAt(r) = byteAt
          at
        }
      })
    }
    // One region for all (the records would outgrow one array before duplicates are dropped), or one per bound.
    if (regions.size == 1) fill(regions.head, 0, bounds.size - 1)
    else inParallel(regions.indices.map(b => () => fill(regions(b), b, b + 1)))
    index.absorb(regions)
    batches.foreach(_.addNullKeysTo(index))
  }

  /**
   * Adds `batches` of keys in two longs to a [[TwoLongKeyIndex]] in one pass over its table, on up to
   * `threads` threads, as the primitive index's `addInSlotOrder`.
   */
  def addInSlotOrder(batches: Seq[DeleteRowBatch], index: TwoLongKeyIndex, threads: Int): Unit = {
    require(batches.forall(b => b.inTwoLongs && (b.form == null || b.form == index.form)),
      s"only batches of keys in the index's form (${index.form.describe}) go to it")
    val runs = new Runs(batches)
    import runs.{ends, keys => highs, scopes, sequences, starts}
    val lows = runs.batches.map(_.lows)
    val ordered = batches.forall(_.orderedFor == index.sizedFor)
    val total = highs.indices.map(r => (ends(r) - starts(r)).toLong).sum
    val regions = index.regions(if (ordered) threads else 1, total, scopes.zip(sequences).distinct.toSeq)
    val stretchOfKey = (r: Int, at: Int) => index.stretchOf(highs(r)(at), lows(r)(at), scopes(r))

    def fill(region: TwoLongKeyIndex.Region): Unit =
      inStretchOrder(highs.indices.map(firstOfRunIn(runs, _, region.firstStretch, TwoLongKeyIndex.Stretches, stretchOfKey)).toArray,
        highs.indices.map(firstOfRunIn(runs, _, region.endStretch, TwoLongKeyIndex.Stretches, stretchOfKey)).toArray,
        region.firstStretch, region.endStretch, new StretchRuns {
          def stretchAt(r: Int, at: Int): Int = stretchOfKey(r, at)
          def addThrough(r: Int, from: Int, end: Int, stretch: Int): Int = {
            val (runHighs, runLows, scope, seq) = (highs(r), lows(r), scopes(r), sequences(r))
            var at = from
            while (at < end && index.stretchOf(runHighs(at), runLows(at), scope) <= stretch) {
              region.add(scope, runHighs(at), runLows(at), seq)
              at += 1
            }
            at
          }
        })

    inParallel(regions.map(region => () => fill(region)))
    index.absorb(regions)
  }

  /** Runs `fills` at once, one thread each (the caller's for a single one), rethrowing the first failure. */
  private def inParallel(fills: Seq[() => Unit]): Unit =
    if (fills.size == 1) fills.head()
    else {
      val failures = new java.util.concurrent.ConcurrentLinkedQueue[Throwable]()
      val workers = fills.map { fill =>
        val worker = new Thread(() => try fill() catch { case e: Throwable => failures.add(e) }, "eqdelete-index-fill")
        worker.setDaemon(true)
        worker.start()
        worker
      }
      workers.foreach(_.join())
      Option(failures.peek()).foreach(e => throw e)
    }

  /** The runs of `batches`, batch by batch: per run its batch, its keys (`starts` until `ends` of them), scope and sequence number. */
  private final class Runs(all: Seq[DeleteRowBatch]) {
    private val runs = for (batch <- all; run <- batch.runs.indices by 3) yield (batch, run)
    val batches: Array[DeleteRowBatch] = runs.map(_._1).toArray
    val keys: Array[Array[Long]] = batches.map(_.keys)
    val starts: Array[Int] = runs.map { case (batch, run) => if (run == 0) 0 else batch.runs(run - 3).toInt }.toArray
    val ends: Array[Int] = runs.map { case (batch, run) => batch.runs(run).toInt }.toArray
    val scopes: Array[Long] = runs.map { case (batch, run) => batch.runs(run + 1) }.toArray
    val sequences: Array[Long] = runs.map { case (batch, run) => batch.runs(run + 2) }.toArray
  }

  /**
   * The first key of run `r` in `stretch` or later of a table's `stretches`: its keys are
   * ordered by the stretch `stretchAt(r, key)` gives.
   */
  private def firstOfRunIn(runs: Runs, r: Int, stretch: Int, stretches: Int, stretchAt: (Int, Int) => Int): Int =
    if (stretch == 0) runs.starts(r) else if (stretch == stretches) runs.ends(r) else {
      var (lo, hi) = (runs.starts(r), runs.ends(r))
      while (lo < hi) {
        val mid = (lo + hi) >>> 1
        if (stretchAt(r, mid) < stretch) lo = mid + 1 else hi = mid
      }
      lo
    }

  /** Where the packed key `n` keys after the one at `from` starts. */
  private def skipKeys(packed: Array[Byte], from: Int, n: Int): Int = {
    var at = from
    var i = 0
    while (i < n) {
      at += KeyBytes.LengthBytes + KeyBytes.readLength(packed, at)
      i += 1
    }
    at
  }

  /** Runs of keys, each ordered by the stretch of the table they go to, as `inStretchOrder` adds them. */
  private trait StretchRuns {
    /** The stretch key `at` of run `r` lands in. */
    def stretchAt(r: Int, at: Int): Int

    /**
     * Adds run `r`'s keys from `from` (before `end`) while they land in `stretch` or an earlier
     * one (a key out of order); returns the first not added, where the run's next call starts.
     */
    def addThrough(r: Int, from: Int, end: Int, stretch: Int): Int
  }

  /**
   * Every key of every run r from `from(r)` until `until(r)`, added stretch by stretch of a table
   * from `firstStretch` until `endStretch`. Each run waits in the list of the stretch its next
   * key lands in, so the pass costs the keys and the stretches, not stretches times runs (a run
   * per delete file: Flink writes many). A key out of order (batches ordered for a table of
   * another size) is added with the keys before it, never left out.
   */
  private def inStretchOrder(from: Array[Int], until: Array[Int], firstStretch: Int, endStretch: Int, runs: StretchRuns): Unit = {
    val positions = from.clone()
    // Per stretch, the first run waiting there, and per run the next one waiting with it (-1: none).
    val waiting = Array.fill(endStretch - firstStretch)(-1)
    val nextWaiting = new Array[Int](from.length)
    def wait(r: Int): Unit = if (positions(r) < until(r)) {
      val at = math.max(runs.stretchAt(r, positions(r)), firstStretch) - firstStretch
      nextWaiting(r) = waiting(at)
      waiting(at) = r
    }
    from.indices.foreach(wait)
    var stretch = firstStretch
    while (stretch < endStretch) {
      var r = waiting(stretch - firstStretch)
      while (r >= 0) {
        val following = nextWaiting(r)
        // Up to the first key of a later stretch, so the run waits only ahead of this one.
        positions(r) = runs.addThrough(r, positions(r), until(r), stretch)
        wait(r)
        r = following
      }
      stretch += 1
    }
    require(positions.indices.forall(r => positions(r) >= until(r)), "a run's keys were not all added")
  }
}
