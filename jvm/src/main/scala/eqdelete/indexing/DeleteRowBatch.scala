package eqdelete.indexing

import scala.collection.mutable.ArrayBuilder

import eqdelete.index.{DeleteKeyIndex, HashedKeyIndex, KeyBitmapIndex, KeyBits, KeyBytes, KeyHash, LongKeyIndex}

import eqdelete.read.DeleteRowReader
import eqdelete.read.DeleteRows.TaskFile

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.types.{DataType, StringType}

/**
 * The delete rows one task read, as it ships them: the keys in a long array (for one integral
 * or floating-point key its [[KeyBits]], for other keys their hash, with the keys packed
 * ([[KeyBytes]]) one after the other, each after its 4-byte length), and, since every row of
 * a delete file has the file's scope and sequence number, those once per run of rows:
 * (end, scope, seq) triples. NULL keys of one column come as (scope, seq) pairs. 8 bytes a row
 * for one integral key, where (key, scope, seq) triples took 24: at 10^7 delete rows the
 * difference was most of what the tasks' results cost to ship (the scale benchmark).
 */
final class DeleteRowBatch private (
    private val keys: Array[Long],
    private val runs: Array[Long],
    nullKeys: Array[Long],
    private val packed: Array[Byte],
    val covered: Long,
    // The keys of the primitive index whose slot order each run's keys are in (0 for hashed
    // keys: their table is filled on one thread, never split into regions).
    private val orderedFor: Long = 0L)
  extends Serializable {

  /** The same rows, and `n` rows dropped as covered before them. */
  def withCovered(n: Long): DeleteRowBatch = new DeleteRowBatch(keys, runs, nullKeys, packed, n, orderedFor)

  private def addNullKeysTo(index: DeleteKeyIndex): Unit = {
    var i = 0
    while (i < nullKeys.length) {
      index.add(nullKeys(i), Array[Any](null), nullKeys(i + 1))
      i += 2
    }
  }
}

object DeleteRowBatch {
  /**
   * Adds `batches` to `index` (the table `DeleteKeyIndex.forKeyTypes` made for them) in one pass
   * over its table, on up to `threads` threads where it is primitive.
   */
  def addAll(batches: Seq[DeleteRowBatch], index: DeleteKeyIndex, threads: Int): Unit = index match {
    case longs: LongKeyIndex => addInSlotOrder(batches, longs, threads)
    case hashed: HashedKeyIndex => addInSlotOrder(batches, hashed)
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

    // Per run, the first of its keys in `stretch` or later: its keys are ordered by stretch.
    def firstIn(r: Int, stretch: Int): Int =
      if (stretch == 0) starts(r) else if (stretch == LongKeyIndex.Stretches) ends(r) else {
        var (lo, hi) = (starts(r), ends(r))
        while (lo < hi) {
          val mid = (lo + hi) >>> 1
          if (index.stretchOf(keys(r)(mid), scopes(r)) < stretch) lo = mid + 1 else hi = mid
        }
        lo
      }

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

    if (regions.size == 1) fill(regions.head)
    else {
      val failures = new java.util.concurrent.ConcurrentLinkedQueue[Throwable]()
      val workers = regions.map { region =>
        val worker = new Thread(() => try fill(region) catch { case e: Throwable => failures.add(e) }, "eqdelete-index-fill")
        worker.setDaemon(true)
        worker.start()
        worker
      }
      workers.foreach(_.join())
      Option(failures.peek()).foreach(e => throw e)
    }
    index.absorb(regions)
    batches.foreach(_.addNullKeysTo(index))
  }

  /**
   * Adds `batches` to a hashed index in one pass over its table, stretch by stretch, as the
   * primitive index's `addInSlotOrder` (on one thread: the records grow at one end). Added batch
   * by batch as they arrived, each task's keys walked the whole table again, 10^6 keys over 3x10^7
   * slots, a cache miss a key: at 10^7 string keys in 10 tasks, more of the query's thread
   * (`HashedKeyIndex.place`) than the read tasks took of theirs, while they wanted both cores.
   */
  def addInSlotOrder(batches: Seq[DeleteRowBatch], index: HashedKeyIndex): Unit = {
    index.reserveRecords(batches.map(_.keys.length.toLong).sum, batches.map(_.packed.length.toLong).sum)
    val runs = new Runs(batches)
    import runs.{ends, scopes, sequences, starts, keys => hashes}
    val packed = runs.batches.map(_.packed)
    // Per run, where its next key's length and bytes lie in its batch's packed keys.
    val packedAt = new Array[Int](starts.length)
    for (r <- starts.indices if starts(r) > 0) packedAt(r) = skipKeys(packed(r), packedAt(r - 1), ends(r - 1) - starts(r - 1))
    inStretchOrder(starts, ends, 0, HashedKeyIndex.Stretches, new StretchRuns {
      def stretchAt(r: Int, at: Int): Int = index.stretchOf(hashes(r)(at), scopes(r))
      def addThrough(r: Int, from: Int, end: Int, stretch: Int): Int = {
        val runHashes = hashes(r)
        val runPacked = packed(r)
        val scope = scopes(r)
        val seq = sequences(r)
        var at = from
        var bytesAt = packedAt(r)
        while (at < end && index.stretchOf(runHashes(at), scope) <= stretch) {
          val length = KeyBytes.readLength(runPacked, bytesAt)
          index.addPacked(runHashes(at), scope, runPacked, bytesAt + KeyBytes.LengthBytes, length, seq)
          bytesAt += KeyBytes.LengthBytes + length
          at += 1
        }
        packedAt(r) = bytesAt
        at
      }
    })
    batches.foreach(_.addNullKeysTo(index))
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

  /**
   * The batch of one task's `files`, each a single primitive key of `keyType`, for a
   * [[LongKeyIndex]] sized for `indexKeys` keys (as `apply` with `primitive`): a file Iceberg's
   * vectorized reader reads gives its keys column by column, with no row in between (at 10^7
   * delete rows, the rows were most of what the index's read tasks cost); any other row by row.
   */
  def ofKeyColumns(files: Iterator[TaskFile], reader: DeleteRowReader, keyType: DataType, indexKeys: Long,
      expectedRows: Long): DeleteRowBatch =
    readKeyColumns(files, reader, keyType, expectedRows).primitive(indexKeys)

  /** The same task's keys as a part of a [[KeyBitmapIndex]]: scopes and sequence numbers are not kept. */
  def bitmapPart(files: Iterator[TaskFile], reader: DeleteRowReader, keyType: DataType,
      expectedRows: Long): KeyBitmapIndex.Part =
    readKeyColumns(files, reader, keyType, expectedRows).bitmapPart()

  private def readKeyColumns(files: Iterator[TaskFile], reader: DeleteRowReader, keyType: DataType,
      expectedRows: Long): TaskKeys = {
    val keys = new TaskKeys(expectedRows)
    eachRow(files, reader, keys)(keys.addPrimitive(_, keyType), keys.addPrimitive(_, keyType))
    keys
  }

  /**
   * Each delete row of a task's `files`, file by file, each file a run of `keys`: handed to
   * `inBatch` where Iceberg's vectorized reader reads the file (the batch's one reused row,
   * pointed at row i, its key columns at `DeleteRowReader.keyOrdinals`), else to `inRow` (its
   * keys first, in order).
   */
  private def eachRow(files: Iterator[TaskFile], reader: DeleteRowReader, keys: TaskKeys)(
      inBatch: InternalRow => Unit, inRow: InternalRow => Unit): Unit =
    files.foreach { file =>
      keys.startRun(file.scope, file.sequenceNumber)
      reader.keyBatches(file.file) match {
        case Some(batches) => batches.foreach { columnar =>
          keys.reserve(columnar.numRows())
          var i = 0
          while (i < columnar.numRows()) {
            inBatch(columnar.getRow(i))
            i += 1
          }
        }
        case None => reader.read(file.file).foreach(inRow)
      }
    }

  /**
   * One task's keys as they arrive (a primitive key's [[KeyBits]], or other keys' hashes), run by
   * run of one scope and sequence number, kept in a plain long array (a Scala builder boxed each
   * key on its way in).
   */
  private final class TaskKeys(expectedRows: Long) {
    private val keys = new Longs(expectedRows)
    private val runs = new ArrayBuilder.ofLong
    private val nulls = new ArrayBuilder.ofLong
    private var (scope, seq) = (0L, 0L) // of the open run; sequence numbers start at 1, so none is open yet
    private var runStart = 0

    /** The rows that follow have this scope and sequence number. */
    def startRun(rowScope: Long, rowSeq: Long): Unit = if (rowSeq != seq || rowScope != scope) {
      closeRun()
      scope = rowScope
      seq = rowSeq
    }

    private def closeRun(): Unit = if (keys.size > runStart) {
      runs += keys.size += scope += seq
      runStart = keys.size
    }

    def reserve(rows: Int): Unit = keys.reserve(rows)

    def add(key: Long): Unit = keys.add(key)

    /** The primitive key of `keyType` at ordinal 0 of `row`, or its NULL. */
    def addPrimitive(row: InternalRow, keyType: DataType): Unit =
      if (row.isNullAt(0)) nulls += scope += seq else keys.add(KeyBits.at(row, 0, keyType))

    /** The batch, each run's keys in the order a LongKeyIndex sized for `indexKeys` fills its table. */
    def primitive(indexKeys: Long): DeleteRowBatch = {
      closeRun()
      val ordered = keys.result()
      val byRun = runs.result()
      var (start, run) = (0, 0)
      while (run < byRun.length) {
        LongKeyIndex.orderForInsert(ordered, start, byRun(run).toInt, byRun(run + 1), indexKeys)
        start = byRun(run).toInt
        run += 3
      }
      new DeleteRowBatch(ordered, byRun, nulls.result(), Array.emptyByteArray, 0L, indexKeys)
    }

    /** The keys (and whether a NULL was among them) as a bitmap part, their runs dropped. */
    def bitmapPart(): KeyBitmapIndex.Part = KeyBitmapIndex.Part.of(keys.unshrunk, keys.size, nulls.result().nonEmpty)

    /**
     * The batch of hashed keys, their keys packed in the same order in the first `packedLength`
     * bytes of `packed`, each run reordered as a HashedKeyIndex sized for `indexKeys` fills its
     * slots (`HashedKeyIndex.insertOrder`).
     */
    def hashed(packed: Array[Byte], packedLength: Int, indexKeys: Long): DeleteRowBatch = {
      closeRun()
      val (hashes, n) = (keys.unshrunk, keys.size) // read only, not shipped: no copy of its exact length
      val byRun = runs.result()
      // Where each key's length and bytes start in `packed`.
      val offsets = new Array[Int](n + 1)
      var i = 0
      while (i < n) {
        offsets(i + 1) = offsets(i) + KeyBytes.LengthBytes + KeyBytes.readLength(packed, offsets(i))
        i += 1
      }
      val orderedHashes = new Array[Long](n)
      val orderedPacked = new Array[Byte](packedLength)
      var (start, run, at) = (0, 0, 0)
      while (run < byRun.length) {
        val end = byRun(run).toInt
        val order = HashedKeyIndex.insertOrder(hashes, start, end, byRun(run + 1), indexKeys)
        var j = 0
        while (j < order.length) {
          val from = start + order(j)
          orderedHashes(start + j) = hashes(from)
          val length = offsets(from + 1) - offsets(from)
          System.arraycopy(packed, offsets(from), orderedPacked, at, length)
          at += length
          j += 1
        }
        start = end
        run += 3
      }
      new DeleteRowBatch(orderedHashes, byRun, Array.emptyLongArray, orderedPacked, 0L)
    }
  }

  /** A growing long array: one per task, millions of keys, where a Scala builder boxed each key (2.13). */
  private final class Longs(expected: Long) {
    private var values = new Array[Long](math.max(16L, math.min(expected, Int.MaxValue - 8L)).toInt)
    var size = 0

    def add(value: Long): Unit = {
      if (size == values.length) reserve(1)
      values(size) = value
      size += 1
    }

    def reserve(more: Int): Unit = if (values.length - size < more) {
      values = java.util.Arrays.copyOf(values, math.min(Int.MaxValue - 8L, math.max(2L * values.length, size.toLong + more)).toInt)
    }

    def result(): Array[Long] = if (size == values.length) values else java.util.Arrays.copyOf(values, size)

    /** The values in the first `size` places of an array that may be longer, without copying them. */
    def unshrunk: Array[Long] = values
  }

  /**
   * The batch of `rows`: (key values..., scope, seq) as [[eqdelete.read.DeleteRows]] reads
   * them; for a [[LongKeyIndex]] (`primitive`) or else a [[HashedKeyIndex]] sized for
   * `indexKeys` keys, whose keys come in the order that index fills its table in
   * (`LongKeyIndex.orderForInsert`, `HashedKeyIndex.insertOrder`).
   */
  def apply(rows: Iterator[InternalRow], keyTypes: Seq[DataType], primitive: Boolean, indexKeys: Long,
      expectedRows: Long = 0): DeleteRowBatch = {
    val keys = new TaskKeys(expectedRows)
    val types = keyTypes.toArray
    val (scopeAt, seqAt) = (types.length, types.length + 1)
    if (primitive) {
      rows.foreach { row =>
        keys.startRun(row.getLong(scopeAt), row.getLong(seqAt))
        keys.addPrimitive(row, types(0))
      }
      keys.primitive(indexKeys)
    } else {
      val packer = new HashedKeys(types)
      val ordinals = types.indices.toArray
      rows.foreach { row =>
        keys.startRun(row.getLong(scopeAt), row.getLong(seqAt))
        keys.add(packer.add(row, ordinals))
      }
      keys.hashed(packer.bytes, packer.length, indexKeys)
    }
  }

  /**
   * The batch of one task's `files` for a [[HashedKeyIndex]] sized for `indexKeys` keys (as
   * `apply` without `primitive`): a file Iceberg's vectorized reader reads gives its key
   * columns batch by batch, each row hashed and packed where it lies in the column vectors;
   * any other row by row. At 10^7 string delete rows, the rows copied out of the vectors and
   * their boxed values were most of what the index's read tasks cost.
   */
  def ofHashedKeyColumns(files: Iterator[TaskFile], reader: DeleteRowReader, keyTypes: Seq[DataType], indexKeys: Long,
      expectedRows: Long): DeleteRowBatch = {
    val keys = new TaskKeys(expectedRows)
    val types = keyTypes.toArray
    val packer = new HashedKeys(types)
    val (inBatch, inRow) = (reader.keyOrdinals, types.indices.toArray)
    eachRow(files, reader, keys)(row => keys.add(packer.add(row, inBatch)), row => keys.add(packer.add(row, inRow)))
    keys.hashed(packer.bytes, packer.length, indexKeys)
  }

  /**
   * One task's hashed keys: each row's key (the columns of `types` at the given ordinals) packed
   * ([[KeyBytes]]) after its length, one after the other, and hashed as [[KeyHash]] hashes the
   * same values boxed, without boxing the common types.
   */
  private final class HashedKeys(types: Array[DataType]) {
    private val key = new KeyBytes
    private var buffer = new Array[Byte](1 << 16)
    private var used = 0

    /** Packs `row`'s key, its columns at `ordinals`; returns its hash. */
    def add(row: InternalRow, ordinals: Array[Int]): Long = {
      key.reset()
      var hash = KeyHash.Seed
      var i = 0
      while (i < types.length) {
        val t = types(i)
        val at = ordinals(i)
        if (row.isNullAt(at)) {
          hash = KeyHash.ofNull(hash)
          key.putNull()
        } else if (t == StringType) {
          val s = row.getUTF8String(at)
          hash = KeyHash.ofLong(hash, s.hashCode())
          key.putUTF8String(s)
        } else if (LongKeyIndex.supports(t)) {
          val bits = KeyBits.at(row, at, t)
          hash = KeyHash.ofLong(hash, bits)
          key.putLong(bits)
        } else {
          val value = row.get(at, t)
          hash = KeyHash.ofValue(hash, value)
          key.put(t, value)
        }
        i += 1
      }
      room(KeyBytes.LengthBytes + key.length)
      KeyBytes.writeLength(buffer, used, key.length)
      System.arraycopy(key.bytes, 0, buffer, used + KeyBytes.LengthBytes, key.length)
      used += KeyBytes.LengthBytes + key.length
      hash
    }

    /** The packed keys: the first `length` bytes of `bytes` (the buffer itself, not copied: `hashed` reorders them into an exact array). */
    def bytes: Array[Byte] = buffer
    def length: Int = used

    private def room(n: Int): Unit = if (used + n > buffer.length) {
      buffer = java.util.Arrays.copyOf(buffer, math.max(used + n, math.min(Int.MaxValue - 8L, 2L * buffer.length).toInt))
    }
  }
}
