package eqdelete.deleteindex

import org.apache.spark.sql.types.DataType

/**
 * Any other key (strings, decimals, booleans, binary, several columns of `types`), behind the
 * same Bloom filter as the primitive table while it stays in cache. Each (scope, key) is one
 * record, and the records lie one after the other in one byte array: hash, scope, newest
 * sequence number, the key's length and the key packed ([[KeyBytes]]). An open-addressing table
 * of longs finds them: per slot the hash's upper 32 bits and the record's offset, 8 bytes, so
 * the table stays small enough for the CPU's caches.
 *
 * A row whose key has no delete (almost every row) costs its hash, computed from the column
 * values without allocating ([[KeyHash]]), and one cache-resident Bloom check (past
 * MaxBloomKeys keys, its slot instead). A row whose key may have one costs its key packed into
 * a reused buffer, a slot, and the record, where scope, sequence number and key bytes share a
 * cache line or two. Profiling multi_key showed those two loads as the lookup's cost; boxed
 * keys had cost one more load per column.
 *
 * Keys compare as Iceberg's equality does: NULL equals NULL, binary by content, floats and
 * doubles as Java's `equals` (NaN equals NaN, -0.0 is not 0.0).
 */
final class HashedKeyIndex(
    types: Seq[DataType],
    expectedKeys: Long,
    maxRecordBytes: Long = HashedKeyIndex.MaxRecordBytes, // smaller in tests only
    maxBloomKeys: Long = HashedKeyIndex.MaxBloomKeys) // likewise
  extends DeleteKeyIndex {
  import HashedKeyIndex.{Hash, KeyAt, RecordLine, Scope, Sequence}

  private val keyTypes = types.toArray
  // 0 is an empty slot; else (hash >>> 32) << 32 | (record offset + 1).
  private var slots = new Array[Long](HashedKeyIndex.capacityFor(expectedKeys))
  private var mask = slots.length - 1
  // Allocated at the first key: as many bytes as `reserveRecords` was told, where the keys came
  // packed and counted, else the estimate (exact for fixed-width keys), as the driver's budget counts it.
  private var records = Array.emptyByteArray
  private var firstRecordBytes = math.max(64L, math.min(expectedKeys * HashedKeyIndex.recordBytes(types), maxRecordBytes))
  private var recordsEnd = 0
  private var used = 0
  private var bloom: BlockedBloom = _ // none past MaxBloomKeys keys
  private var isSealed = false

  require(keyTypes.forall(KeyBytes.supports), s"no packed form for key types ${types.mkString(", ")}")

  def distinctKeys: Int = used

  /** Bytes its arrays hold: slots, records and, once sealed, the Bloom filter. */
  def retainedBytes: Long = 8L * slots.length + records.length + (if (bloom == null) 0L else BlockedBloom.bytesFor(used))

  /**
   * The records of `keys` keys arriving packed in `packedBytes` bytes, each after its length, as
   * the read tasks ship them: allocated exactly, before the first is added, where the estimate
   * for strings (29 bytes a key) cost an allocation of its size and a copy of the records at
   * `seal` (at 10^7 `key-<n>` strings, 570 MB allocated for 445 MB of records).
   */
  def reserveRecords(keys: Long, packedBytes: Long): Unit = if (recordsEnd == 0) {
    firstRecordBytes = math.max(64L, math.min(keys * KeyAt + packedBytes, maxRecordBytes))
  }

  override def seal(): this.type = {
    // Shipped to every executor as it is, by whichever serializer Spark uses: without spare room.
    if (records.length != recordsEnd) records = java.util.Arrays.copyOf(records, recordsEnd)
    isSealed = true
    // Only while it stays in cache (see LongKeyIndex): past that, a probe of a key without
    // deletes costs the filter's miss where it would have cost the slot's, and filling it took
    // a miss a key (at 10^7 string keys, 1 s of the driver's 1.24 s build; HashedKeyIndexCost).
    if (used <= maxBloomKeys) {
      bloom = BlockedBloom.forKeys(used)
      var at = 0
      while (at < recordsEnd) {
        bloom.add(KeyBytes.readLong(records, at + Hash))
        at = next(at)
      }
    }
    this
  }

  /**
   * False when no delete has a key of this hash: the common case, without touching the table
   * (always true past MaxBloomKeys keys, where there is no filter).
   */
  def mightContain(hash: Long): Boolean = bloom == null || bloom.mightContain(hash)

  def newestOf(scope: Long, values: Array[Any]): Long = {
    // As generated code does: the key is packed only when the Bloom filter may hold it.
    val hash = KeyHash.of(values)
    if (mightContain(hash)) newest(scope, hash, pack(values)) else DeleteKeyIndex.NoDelete
  }

  /** `values` packed, in a fresh buffer: for the interpreted paths. */
  def pack(values: Array[Any]): KeyBytes = KeyBytes.pack(keyTypes, values, new KeyBytes)

  protected def put(scope: Long, values: Array[Any], sequenceNumber: Long): Unit = {
    val key = pack(values)
    putPacked(KeyHash.of(values), scope, key.bytes, 0, key.length, sequenceNumber)
  }

  /**
   * A delete row already hashed and packed (`length` bytes of `packed` from `offset`), as the
   * tasks reading delete files ship them.
   */
  def addPacked(hash: Long, scope: Long, packed: Array[Byte], offset: Int, length: Int, sequenceNumber: Long): Unit = {
    noteScope(scope, sequenceNumber)
    putPacked(hash, scope, packed, offset, length, sequenceNumber)
  }

  private def putPacked(hash: Long, scope: Long, packed: Array[Byte], offset: Int, length: Int, sequenceNumber: Long): Unit = {
    require(!isSealed, "the index is sealed")
    if ((used + 1) * 2 > mask + 1) grow()
    val at = find(hash, scope, packed, offset, length)
    if (at >= 0) {
      if (KeyBytes.readLong(records, at + Sequence) < sequenceNumber) KeyBytes.writeLong(records, at + Sequence, sequenceNumber)
    } else {
      place(hash, scope, append(hash, scope, sequenceNumber, packed, offset, length))
      used += 1
    }
  }

  /**
   * The newest delete of the key (of `hash`, see [[KeyHash]]) in `scope` or globally, or
   * NoDelete; callers check `mightContain(hash)` first, before packing the key.
   */
  def newest(scope: Long, hash: Long, key: KeyBytes): Long = newestPacked(scope, hash, key.bytes, 0, key.length)

  /** `newest` of the key packed in `length` bytes of `packed` from `offset`. */
  private def newestPacked(scope: Long, hash: Long, packed: Array[Byte], offset: Int, length: Int): Long = {
    val global = if (hasGlobal) sequenceOf(find(hash, DeleteKeyIndex.GlobalScope, packed, offset, length)) else DeleteKeyIndex.NoDelete
    if (scoped && scope != DeleteKeyIndex.GlobalScope) math.max(global, sequenceOf(find(hash, scope, packed, offset, length))) else global
  }

  /**
   * `newest` of `n` keys at once: key i of hash `hashes(i)`, packed in `packed` from
   * `offsets(i)` until `offsets(i + 1)`, its newest delete into `out(i)`. In passes over the keys,
   * each a short loop of loads that do not wait on one another, so the core overlaps the cache
   * misses of many keys: one key at a time, a key's slot and record were two misses in a row,
   * each waited for whole (~170 ns apart on this machine, where independent loads overlap to
   * ~20 ns). First the home slot of every key the Bloom filter (if any) lets through, then the
   * first two lines of the record a matching fingerprint points at, then the lookups themselves,
   * which find those lines in cache. `out` and `entries` (scratch room of at least `n` longs)
   * are the caller's own: the index itself is only read, by every task thread at once.
   */
  def newestAll(scope: Long, hashes: Array[Long], packed: Array[Byte], offsets: Array[Int], n: Int,
      out: Array[Long], entries: Array[Long]): Unit = {
    if (hasGlobal) prefetch(DeleteKeyIndex.GlobalScope, hashes, n, entries)
    if (scoped && scope != DeleteKeyIndex.GlobalScope) prefetch(scope, hashes, n, entries)
    var i = 0
    while (i < n) {
      val hash = hashes(i)
      out(i) =
        if (!mightContain(hash)) DeleteKeyIndex.NoDelete
        else newestPacked(scope, hash, packed, offsets(i), offsets(i + 1) - offsets(i))
      i += 1
    }
  }

  /**
   * The home slots in `scope` of the keys the Bloom filter lets through, then the records their
   * fingerprints point at, loaded (see `newestAll`). What a load read is stored in `entries`,
   * which nothing reads after, so that the JIT keeps the load.
   */
  private def prefetch(scope: Long, hashes: Array[Long], n: Int, entries: Array[Long]): Unit = {
    var i = 0
    while (i < n) {
      val hash = hashes(i)
      entries(i) = if (mightContain(hash)) slots(slot(hash, scope)) else 0L
      i += 1
    }
    i = 0
    while (i < n) {
      val entry = entries(i)
      if (entry != 0 && entry >>> 32 == hashes(i) >>> 32) {
        val at = (entry & 0xFFFFFFFFL).toInt - 1
        // Its first line and the next: a 36-character key's record takes 69 bytes, and the key's
        // compare waited on its second line (JFR, 10^7 UUID strings).
        entries(i) = records(at) + records(math.min(at + RecordLine, records.length - 1))
      }
      i += 1
    }
  }

  /** The keys its table is sized for: a batch ordered for another size is not in its slot order. */
  def sizedFor: Long = expectedKeys

  /**
   * Where to split the table into at most `parts` regions of whole stretches for threads to fill
   * at once (see [[HashedKeyIndex.Region]]), for `keys` keys: the stretch each region starts at,
   * then `Stretches`. One region unless the index is empty, big enough to split (from 65,536
   * slots, a stretch being a slot below that) and needs not grow for them (that would move every slot).
   */
  def regionBounds(parts: Int, keys: Long): IndexedSeq[Int] = {
    val n = if (parts <= 1 || used > 0 || mask + 1 < HashedKeyIndex.Stretches || 2 * keys > mask + 1) 1 else parts
    (0 to n).map(k => (k.toLong * HashedKeyIndex.Stretches / n).toInt)
  }

  /**
   * The regions between `bounds` (from `regionBounds`), region i given `recordBytes(i)` bytes of
   * the records, for keys in runs of the given (scope, sequence number) pairs. Every region
   * writes its own slots and its own bytes only, so threads fill them without a lock; `absorb`
   * them once every thread is done. A single region adds straight to the index.
   */
  def regions(bounds: IndexedSeq[Int], recordBytes: IndexedSeq[Long], runs: Seq[(Long, Long)]): IndexedSeq[HashedKeyIndex.Region] = {
    require(!isSealed, "the index is sealed")
    runs.foreach { case (scope, seq) => noteScope(scope, seq) }
    val total = recordBytes.sum
    if (bounds.size <= 2 || total > maxRecordBytes) IndexedSeq(new HashedKeyIndex.Region(this, 0, 0, 0, whole = true))
    else {
      require(used == 0 && recordsEnd == 0, "only an empty index is split into regions") // regionBounds made sure
      records = new Array[Byte](total.toInt)
      val bases = recordBytes.scanLeft(0L)(_ + _).map(_.toInt)
      bounds.indices.init.map { i =>
        new HashedKeyIndex.Region(this, bounds(i) << stretchShift, bases(i), bases(i + 1), whole = false,
          until = bounds(i + 1) << stretchShift)
      }
    }
  }

  private def stretchShift: Int = HashedKeyIndex.stretchShift(mask)

  /**
   * Takes in what `regions` filled: their records moved together (their slots' offsets with them),
   * their keys counted, then the keys each kept aside (their probe left the region) added.
   */
  def absorb(regions: Seq[HashedKeyIndex.Region]): Unit = if (!regions.forall(_.whole)) {
    var end = 0
    regions.foreach { region =>
      val shift = region.base - end
      if (shift > 0) {
        System.arraycopy(records, region.base, records, end, region.end - region.base)
        var i = region.from
        while (i < region.until) {
          if (slots(i) != 0) slots(i) -= shift // the offset, in the lower half, stays above the shift
          i += 1
        }
      }
      end += region.end - region.base
      used += region.added
    }
    recordsEnd = end
    regions.foreach(_.keptAside.foreach { case (hash, scope, key, seq) => putPacked(hash, scope, key, 0, key.length, seq) })
  }

  /**
   * Region `region`'s add: the record of a new key written at `at` (within its bytes), its slot
   * found by a probe from its home slot that stays within `from until until`. 1 for a new key, 0
   * for one present (its sequence number raised), -1 when the probe left the region (nothing written).
   */
  private[deleteindex] def addWithin(hash: Long, scope: Long, packed: Array[Byte], offset: Int, length: Int,
      sequenceNumber: Long, from: Int, until: Int, at: Int): Int = {
    val fingerprint = hash >>> 32
    var i = slot(hash, scope)
    if (i < from || i >= until) return -1
    while (slots(i) != 0) {
      val entry = slots(i)
      if (entry >>> 32 == fingerprint) {
        val record = (entry & 0xFFFFFFFFL).toInt - 1
        if (KeyBytes.readLong(records, record + Scope) == scope && sameKey(record, packed, offset, length)) {
          if (KeyBytes.readLong(records, record + Sequence) < sequenceNumber) KeyBytes.writeLong(records, record + Sequence, sequenceNumber)
          return 0
        }
      }
      i += 1
      if (i == until) return -1
    }
    writeRecord(at, hash, scope, sequenceNumber, packed, offset, length)
    slots(i) = (fingerprint << 32) | (at + 1L)
    1
  }

  private def sequenceOf(record: Int): Long = if (record < 0) DeleteKeyIndex.NoDelete else KeyBytes.readLong(records, record + Sequence)

  private def slot(hash: Long, scope: Long): Int = HashedKeyIndex.slotOf(hash, scope, mask)

  /**
   * Which of the table's `HashedKeyIndex.Stretches` stretches the home slot of a key of `hash` in
   * `scope` lies in: keys added stretch by stretch fill the table front to back (see `insertOrder`).
   */
  def stretchOf(hash: Long, scope: Long): Int = slot(hash, scope) >>> HashedKeyIndex.stretchShift(mask)

  /** The offset of the record of (scope, key), or -1. */
  private def find(hash: Long, scope: Long, packed: Array[Byte], offset: Int, length: Int): Int = {
    val fingerprint = hash >>> 32
    var i = slot(hash, scope)
    while (true) {
      val entry = slots(i)
      if (entry == 0) return -1
      if (entry >>> 32 == fingerprint) {
        val at = (entry & 0xFFFFFFFFL).toInt - 1
        if (KeyBytes.readLong(records, at + Scope) == scope && sameKey(at, packed, offset, length)) return at
      }
      i = (i + 1) & mask
    }
    -1
  }

  private def sameKey(at: Int, packed: Array[Byte], offset: Int, length: Int): Boolean = {
    val start = at + KeyAt
    KeyBytes.readLength(records, start) == length &&
      java.util.Arrays.equals(records, start + KeyBytes.LengthBytes, start + KeyBytes.LengthBytes + length, packed, offset, offset + length)
  }

  private def place(hash: Long, scope: Long, record: Int): Unit = {
    var i = slot(hash, scope)
    while (slots(i) != 0) i = (i + 1) & mask
    slots(i) = ((hash >>> 32) << 32) | (record + 1L)
  }

  private def next(record: Int): Int = record + KeyAt + KeyBytes.LengthBytes + KeyBytes.readLength(records, record + KeyAt)

  /** Appends a record; returns where it starts. */
  private def append(hash: Long, scope: Long, sequenceNumber: Long, packed: Array[Byte], offset: Int, length: Int): Int = {
    val need = recordsEnd.toLong + KeyAt + KeyBytes.LengthBytes + length
    if (need > maxRecordBytes) {
      throw new IndexCapacityException(s"the delete keys take more than ${maxRecordBytes} bytes packed, " +
        s"more than one index holds (after $used keys)")
    }
    if (need > records.length) {
      records =
        if (records.length == 0) new Array[Byte](math.max(need, firstRecordBytes).toInt)
        else java.util.Arrays.copyOf(records, math.min(maxRecordBytes, math.max(need, 2L * records.length)).toInt)
    }
    val at = recordsEnd
    writeRecord(at, hash, scope, sequenceNumber, packed, offset, length)
    recordsEnd = need.toInt
    at
  }

  private def writeRecord(at: Int, hash: Long, scope: Long, sequenceNumber: Long, packed: Array[Byte], offset: Int, length: Int): Unit = {
    KeyBytes.writeLong(records, at + Hash, hash)
    KeyBytes.writeLong(records, at + Scope, scope)
    KeyBytes.writeLong(records, at + Sequence, sequenceNumber)
    KeyBytes.writeLength(records, at + KeyAt, length)
    System.arraycopy(packed, offset, records, at + KeyAt + KeyBytes.LengthBytes, length)
  }

  private def grow(): Unit = {
    slots = new Array[Long](slots.length * 2)
    mask = slots.length - 1
    var at = 0
    while (at < recordsEnd) {
      place(KeyBytes.readLong(records, at + Hash), KeyBytes.readLong(records, at + Scope), at)
      at = next(at)
    }
  }
}

object HashedKeyIndex {
  /**
   * The slots `from until until` of `index`'s table (its stretches' home slots) and its records'
   * bytes `base until limit`, which one thread fills while others fill other regions: it writes
   * only those, so no lock is needed. A key whose probe would leave the region is kept aside for
   * `absorb`. Linear probing keeps every slot from a key's home to its own filled, so a later
   * duplicate of a key kept aside is kept aside too, and of one placed finds it: every key is
   * added once, with its newest sequence number, as one thread adding them all would.
   */
  final class Region private[HashedKeyIndex] (index: HashedKeyIndex, val from: Int, val base: Int, limit: Int,
      val whole: Boolean, val until: Int = 0) {
    private[HashedKeyIndex] var end = base
    private[HashedKeyIndex] var added = 0
    private val aside = scala.collection.mutable.ArrayBuffer[(Long, Long, Array[Byte], Long)]()

    /** Adds a key packed in `length` bytes of `packed` from `offset` (see `addPacked`). */
    def add(hash: Long, scope: Long, packed: Array[Byte], offset: Int, length: Int, sequenceNumber: Long): Unit =
      if (whole) index.addPacked(hash, scope, packed, offset, length, sequenceNumber)
      else {
        val bytes = KeyAt + KeyBytes.LengthBytes + length
        val result =
          if (end + bytes > limit) -1 // more bytes than it was given: never for batches counted right
          else index.addWithin(hash, scope, packed, offset, length, sequenceNumber, from, until, end)
        if (result == 1) {
          end += bytes
          added += 1
        } else if (result < 0) aside += ((hash, scope, java.util.Arrays.copyOfRange(packed, offset, offset + length), sequenceNumber))
      }

    private[HashedKeyIndex] def keptAside: Seq[(Long, Long, Array[Byte], Long)] = aside.toSeq
  }

  /** Bytes a key's record takes beyond its packed bytes and their length: hash, scope, sequence number. */
  val RecordHeaderBytes: Int = 24

  /** Slots for `keys` keys: a power of two, at most half full. */
  private def slotsFor(keys: Long): Long = {
    var capacity = 1024L
    while (capacity < 2 * keys) capacity *= 2
    capacity
  }

  /** The home slot of a key of `hash` in `scope`, in a table of `mask` + 1 slots. */
  def slotOf(hash: Long, scope: Long, mask: Int): Int = {
    val h = hash + scope * 0xC2B2AE3D27D4EB4FL
    ((h ^ (h >>> 29)) * 0xBF58476D1CE4E5B9L >>> 32).toInt & mask
  }

  /**
   * Orders the keys `from` until `until` of one scope (by their hashes) as an index sized for
   * `expectedKeys` keys fills its slots: added in that order, they walk its table front to back,
   * where in the order read every key was a cache and TLB miss (at 10^7 string keys, 3.2 s on
   * one thread against 0.24 s; HashedKeyIndexCost). Returns the permutation: the i-th key of the
   * ordered run is the `result(i)`-th of the run read. Two passes of a radix sort on the upper
   * 16 bits of the home slot, as `LongKeyIndex.orderForInsert`: within one of those 65,536
   * stretches of the table, order does not matter, as it stays in cache.
   */
  def insertOrder(hashes: Array[Long], from: Int, until: Int, scope: Long, expectedKeys: Long): Array[Int] = {
    val n = until - from
    val mask = capacityFor(expectedKeys) - 1
    val shift = stretchShift(mask)
    val stretches = new Array[Char](n)
    var i = 0
    while (i < n) { stretches(i) = (slotOf(hashes(from + i), scope, mask) >>> shift).toChar; i += 1 }
    StretchOrder.of(stretches, n)
  }

  /** Stretches of a table: its home slots' upper 16 bits (every slot its own below 65,536 slots). */
  val Stretches: Int = 1 << 16

  /** How far a home slot of a table of `mask` + 1 slots shifts down to its stretch. */
  private[deleteindex] def stretchShift(mask: Int): Int = math.max(0, Integer.numberOfTrailingZeros(mask + 1) - 16)

  private def capacityFor(keys: Long): Int = {
    val capacity = slotsFor(keys)
    require(capacity <= Int.MaxValue - 8, s"$keys keys are too many for one index")
    capacity.toInt
  }

  /** Keys up to which a Bloom filter (16-32 bits a key) stays within a few MB of cache, as LongKeyIndex's. */
  private[deleteindex] val MaxBloomKeys = 2000000L

  /** The most bytes of records one index holds: one Java array. */
  val MaxRecordBytes: Long = Int.MaxValue - 8L

  // A record's layout: where its fields start.
  private val Hash = 0
  private val Scope = 8
  private val Sequence = 16
  private val KeyAt = RecordHeaderBytes
  // A record's start plus this lies in the cache line after the start's.
  private val RecordLine = 64

  /**
   * Bytes `keys` keys of `types` take at most: the index's fixed parts, its slots, Bloom filter
   * and records (a guess for the length of strings and binary values).
   */
  def bytesFor(types: Seq[DataType], keys: Long): Long =
    // A Bloom filter for up to MaxBloomKeys distinct keys, however many records: duplicates are only known once added.
    4096 + 8 * slotsFor(keys) + BlockedBloom.bytesFor(math.min(keys, MaxBloomKeys)) + keys * recordBytes(types)

  private def recordBytes(types: Seq[DataType]): Long = KeyAt + KeyBytes.LengthBytes + types.map(t => KeyBytes.estimatedBytes(t).toLong).sum
}
