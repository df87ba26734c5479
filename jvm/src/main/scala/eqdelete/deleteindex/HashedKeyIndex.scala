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
  import HashedKeyIndex.{Hash, KeyAt, Scope, Sequence}

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
   * first line of the record a matching fingerprint points at, then the lookups themselves,
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
      if (entry != 0 && entry >>> 32 == hashes(i) >>> 32) entries(i) = records((entry & 0xFFFFFFFFL).toInt - 1 + Sequence)
      i += 1
    }
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
    KeyBytes.writeLong(records, at + Hash, hash)
    KeyBytes.writeLong(records, at + Scope, scope)
    KeyBytes.writeLong(records, at + Sequence, sequenceNumber)
    KeyBytes.writeLength(records, at + KeyAt, length)
    System.arraycopy(packed, offset, records, at + KeyAt + KeyBytes.LengthBytes, length)
    recordsEnd = need.toInt
    at
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

  /** Stretches of a table: its home slots' upper 16 bits (every slot its own below 65,536 slots). */
  val Stretches: Int = 1 << 16

  /** How far a home slot of a table of `mask` + 1 slots shifts down to its stretch. */
  private def stretchShift(mask: Int): Int = math.max(0, Integer.numberOfTrailingZeros(mask + 1) - 16)

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
  private val KeyAt = 24

  /**
   * Bytes `keys` keys of `types` take at most: the index's fixed parts, its slots, Bloom filter
   * and records (a guess for the length of strings and binary values).
   */
  def bytesFor(types: Seq[DataType], keys: Long): Long =
    // A Bloom filter for up to MaxBloomKeys distinct keys, however many records: duplicates are only known once added.
    4096 + 8 * slotsFor(keys) + BlockedBloom.bytesFor(math.min(keys, MaxBloomKeys)) + keys * recordBytes(types)

  private def recordBytes(types: Seq[DataType]): Long = KeyAt + KeyBytes.LengthBytes + types.map(t => KeyBytes.estimatedBytes(t).toLong).sum
}
