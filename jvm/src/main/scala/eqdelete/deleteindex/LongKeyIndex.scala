package eqdelete.deleteindex

import java.util.{HashMap => JHashMap}

import org.apache.spark.sql.types.{DataType, DateType, DoubleType, FloatType, IntegerType, LongType, TimestampNTZType, TimestampType}

/**
 * One integral or floating-point key, as [[KeyBits]]: open addressing over a single long array
 * of (key, scope and sequence number) pairs, the scope in the upper and the sequence number in
 * the lower half of the second long, so a lookup usually touches one cache line and allocates
 * nothing. NULL keys live apart. Sequence numbers up to [[LongKeyIndex.MaxSequenceNumber]] only:
 * a table past it gets the general index (see `DeleteKeyIndex.forKeyTypes`).
 *
 * Almost every row's key has no delete, and a table of 100k keys or more outgrows the CPU's
 * L2 cache, where a probe is a cache miss: profiling the filter strategy showed those misses
 * as its largest cost. So a sealed index first checks a small blocked Bloom filter (16 bits
 * per key, two bits in one 64-bit word, about 2% false positives) that stays in cache. Past the
 * cache, every probe is a miss, and what it costs is the bytes it reads: 16 a slot, not 24 as
 * with the scope in a long of its own (the scale benchmark's delete axis, PERFORMANCE.md).
 */
final class LongKeyIndex(expectedKeys: Long) extends DeleteKeyIndex {
  import LongKeyIndex.{Empty, SequenceBits}

  // Sized once for every key it may get, so building it never holds two tables at a time; any
  // number of slots (not a power of two), so the table is as small as its load allows.
  private var capacity = LongKeyIndex.tableSlotsFor(expectedKeys)
  private var slots = new Array[Long](2 * capacity)
  private var used = 0
  private val nullKeys = new JHashMap[java.lang.Long, java.lang.Long]()
  // Filled as keys are added, so sealing needs no second pass over the table. Only while it is
  // small enough to stay in cache: a Bloom filter that misses the cache costs every row the miss
  // it was to save the rows without deletes (the scale benchmark, PERFORMANCE.md).
  private val bloom: BlockedBloom =
    if (expectedKeys <= LongKeyIndex.MaxBloomKeys) BlockedBloom.forKeys(expectedKeys.toInt) else null
  private var isSealed = false
  // The smallest and largest key added, for the bitmap `seal` may make.
  private var (minKey, maxKey) = (Long.MaxValue, Long.MinValue)
  // Sealed: where the keys span a range of at most DenseBitsPerKey bits a key, a bit per value of
  // that range, set for the keys present (any scope). Exact, and small enough to stay in cache
  // past the Bloom filter's size: at 10^7 keys over a range of 2x10^7, 2.5 MB, where every probe
  // of the table is a miss (a third of the table at most; data read in key order walks it front
  // to back). Keys of integer ids, the common case, are dense this way.
  private var dense: Array[Long] = _
  private var denseMin = 0L

  def distinctKeys: Int = used + nullKeys.size

  override def seal(): this.type = {
    if (!isSealed && used > 0) {
      val span = maxKey - minKey // as unsigned, exact whatever the keys' signs
      if (java.lang.Long.compareUnsigned(span, LongKeyIndex.DenseBitsPerKey * used.toLong) < 0) {
        val words = new Array[Long](((span + 64) >>> 6).toInt)
        var at = 0
        while (at < slots.length) {
          if (slots(at + 1) != Empty) KeyBitmapIndex.setBit(words, minKey, slots(at))
          at += 2
        }
        dense = words
        denseMin = minKey
      }
    }
    isSealed = true
    this
  }

  private def maybePresent(key: Long): Boolean =
    if (dense != null) KeyBitmapIndex.contains(dense, denseMin, key)
    else bloom == null || bloom.mightContain(LongKeyIndex.bloomHash(key))

  private def noteRange(key: Long): Unit = {
    if (key < minKey) minKey = key
    if (key > maxKey) maxKey = key
  }

  protected def put(scope: Long, values: Array[Any], sequenceNumber: Long): Unit = values(0) match {
    case null => nullKeys.merge(scope, sequenceNumber, (a, b) => math.max(a, b))
    case value =>
      require(!isSealed, "the index is sealed")
      insert(KeyBits.of(value), scope, sequenceNumber)
  }

  /** `add` of a non-NULL key given as its [[KeyBits]], without boxing it. */
  def addBits(scope: Long, key: Long, sequenceNumber: Long): Unit = {
    require(!isSealed, "the index is sealed")
    noteScope(scope, sequenceNumber)
    insert(key, scope, sequenceNumber)
  }

  def newestOf(scope: Long, values: Array[Any]): Long = {
    val value = values(0)
    newest(scope, value == null, if (value == null) 0L else KeyBits.of(value))
  }

  /** The newest delete of `key` in `scope` or globally, or NoDelete. */
  def newest(scope: Long, isNull: Boolean, key: Long): Long = {
    if (isNull) {
      val global = if (hasGlobal) nullKeys.get(DeleteKeyIndex.GlobalScope.toLong) else null
      val local = if (scoped) nullKeys.get(scope) else null
      def orNone(seq: java.lang.Long): Long = if (seq == null) DeleteKeyIndex.NoDelete else seq.longValue()
      math.max(orNone(global), orNone(local))
    } else if (!maybePresent(key)) {
      DeleteKeyIndex.NoDelete
    } else {
      val global = if (hasGlobal) lookup(key, DeleteKeyIndex.GlobalScope) else DeleteKeyIndex.NoDelete
      if (scoped && scope != DeleteKeyIndex.GlobalScope) math.max(global, lookup(key, scope)) else global
    }
  }

  private def slot(key: Long, scope: Long): Int = LongKeyIndex.homeSlot(key, scope, capacity)

  /**
   * Which of the table's `LongKeyIndex.Stretches` stretches the key's home slot lies in: keys
   * added stretch by stretch fill the table front to back (see `LongKeyIndex.orderForInsert`).
   */
  def stretchOf(key: Long, scope: Long): Int = LongKeyIndex.stretch(slot(key, scope), capacity)

  private def next(i: Int): Int = if (i + 1 == capacity) 0 else i + 1

  /** The keys' table is sized for: a batch ordered for another size is not in this table's slot order. */
  def sizedFor: Long = expectedKeys

  /**
   * The table split into at most `parts` regions of whole stretches, which threads may fill at
   * once, each only its own (see [[LongKeyIndex.Region]]), for `keys` more keys in runs of the
   * given (scope, sequence number) pairs. One region when the table keeps a Bloom filter
   * (shared by every region) or `keys` could make it grow (it would move every slot).
   * `absorb` the regions once every thread is done.
   */
  def regions(parts: Int, keys: Long, runs: Seq[(Long, Long)]): IndexedSeq[LongKeyIndex.Region] = {
    require(!isSealed, "the index is sealed")
    runs.foreach { case (scope, seq) => noteScope(scope, seq) }
    val whole = parts <= 1 || bloom != null || used + keys > capacity * LongKeyIndex.MaxLoad
    StretchOrder.regions(parts, LongKeyIndex.Stretches, whole).map { case (first, end) =>
      new LongKeyIndex.Region(this, first, end, whole)
    }
  }

  /** Adds what `regions` kept aside (keys whose probe left their region) and counts their keys. */
  def absorb(regions: Seq[LongKeyIndex.Region]): Unit = regions.foreach { region =>
    used += region.added
    if (region.added > 0) { noteRange(region.minKey); noteRange(region.maxKey) }
    region.keptAside.foreach { case (scope, key, seq) => insert(key, scope, seq) }
  }

  /** The first slot whose home stretch is `stretch` or later (`capacity` past the last). */
  private[deleteindex] def firstSlotOf(stretch: Int): Int =
    ((stretch.toLong * capacity + LongKeyIndex.Stretches - 1) / LongKeyIndex.Stretches).toInt

  /**
   * Puts `key` into its slot if the probe from its home slot stays within `from until until`:
   * 1 for a new key, 0 for one present; else leaves the table alone: -1. Counts nothing (the
   * region does) and never grows the table (`regions` made sure it need not).
   */
  private[deleteindex] def insertWithin(key: Long, scope: Long, sequenceNumber: Long, from: Int, until: Int): Int = {
    checkPacks(scope, sequenceNumber)
    var i = slot(key, scope)
    if (i < from || i >= until) return -1
    while (slots(2 * i + 1) != Empty && !(slots(2 * i) == key && (slots(2 * i + 1) >> SequenceBits) == scope)) {
      i += 1
      if (i == until) return -1
    }
    val at = 2 * i
    if (slots(at + 1) == Empty) {
      slots(at) = key
      slots(at + 1) = (scope << SequenceBits) | sequenceNumber
      if (bloom != null) bloom.add(LongKeyIndex.bloomHash(key))
      1
    } else {
      if (LongKeyIndex.sequenceOf(slots(at + 1)) < sequenceNumber) slots(at + 1) = (scope << SequenceBits) | sequenceNumber
      0
    }
  }

  private def lookup(key: Long, scope: Long): Long = {
    var i = slot(key, scope)
    while (true) {
      val entry = slots(2 * i + 1)
      if (entry == Empty) return DeleteKeyIndex.NoDelete
      if (slots(2 * i) == key && (entry >> SequenceBits) == scope) return LongKeyIndex.sequenceOf(entry)
      i = next(i)
    }
    DeleteKeyIndex.NoDelete
  }

  private def checkPacks(scope: Long, sequenceNumber: Long): Unit =
    if (sequenceNumber > LongKeyIndex.MaxSequenceNumber || scope != scope.toInt) {
      // forKeyTypes gives such sets the general index; reaching here is a bug, never a wrong row.
      throw new IndexCapacityException(s"delete sequence number $sequenceNumber or scope $scope is past the primitive index")
    }

  private[deleteindex] def insert(key: Long, scope: Long, sequenceNumber: Long): Unit = {
    checkPacks(scope, sequenceNumber)
    if (used + 1 > capacity * LongKeyIndex.MaxLoad) grow()
    val entry = (scope << SequenceBits) | sequenceNumber
    var i = slot(key, scope)
    while (slots(2 * i + 1) != Empty && !(slots(2 * i) == key && (slots(2 * i + 1) >> SequenceBits) == scope)) i = next(i)
    val at = 2 * i
    if (slots(at + 1) == Empty) {
      used += 1
      slots(at) = key
      slots(at + 1) = entry
      noteRange(key)
      if (bloom != null) bloom.add(LongKeyIndex.bloomHash(key))
    } else if (LongKeyIndex.sequenceOf(slots(at + 1)) < sequenceNumber) {
      slots(at + 1) = entry
    }
  }

  private def grow(): Unit = {
    val old = slots
    capacity = LongKeyIndex.checked(2L * capacity)
    slots = new Array[Long](2 * capacity)
    used = 0
    var at = 0
    while (at < old.length) {
      if (old(at + 1) != Empty) insert(old(at), old(at + 1) >> SequenceBits, LongKeyIndex.sequenceOf(old(at + 1)))
      at += 2
    }
  }
}

object LongKeyIndex {
  /**
   * Stretches `firstStretch until endStretch` of `index`'s table: the slots their keys' home
   * slots lie in, which one thread fills while others fill other regions. It writes only those
   * slots, so no lock is needed; a key whose probe would run past them is kept aside for
   * `absorb`. Linear probing keeps every slot from a key's home to its own filled, so a later
   * duplicate of a key kept aside is kept aside too, and of one placed finds it: every key is
   * added once, with its newest sequence number, as one thread adding them all would.
   */
  final class Region private[LongKeyIndex] (index: LongKeyIndex, val firstStretch: Int, val endStretch: Int, whole: Boolean) {
    private val (from, until) = (index.firstSlotOf(firstStretch), index.firstSlotOf(endStretch))
    private val aside = scala.collection.mutable.ArrayBuffer[(Long, Long, Long)]()
    private[LongKeyIndex] var added = 0
    private[LongKeyIndex] var (minKey, maxKey) = (Long.MaxValue, Long.MinValue) // of the keys it added

    def add(scope: Long, key: Long, sequenceNumber: Long): Unit =
      if (whole) index.insert(key, scope, sequenceNumber) // the only region: the table's own insert, growing it if need be
      else index.insertWithin(key, scope, sequenceNumber, from, until) match {
        case 1 =>
          added += 1
          if (key < minKey) minKey = key
          if (key > maxKey) maxKey = key
        case 0 =>
        case _ => aside += ((scope, key, sequenceNumber))
      }

    private[LongKeyIndex] def keptAside: Seq[(Long, Long, Long)] = aside.toSeq
  }

  /** The newest sequence number a slot holds: its lower 32 bits, unsigned. */
  val MaxSequenceNumber: Long = 0xFFFFFFFFL
  private val SequenceBits = 32
  // Sequence numbers of delete files start at 1, so a used slot's second long is never 0.
  private val Empty = 0L

  private def sequenceOf(entry: Long): Long = entry & MaxSequenceNumber

  /** The key's home slot: the hash's upper half scaled to the capacity (no power of two needed). */
  private def homeSlot(key: Long, scope: Long, capacity: Int): Int = {
    var h = key * 0x9E3779B97F4A7C15L + scope * 0xC2B2AE3D27D4EB4FL
    h ^= h >>> 29
    h *= 0xBF58476D1CE4E5B9L
    (((h ^ (h >>> 32)) >>> 32) * capacity >>> 32).toInt
  }

  /** The stretches a table is ordered by, for adding keys front to back. */
  val Stretches: Int = 1 << 16

  private def stretch(slot: Int, capacity: Int): Int = ((slot.toLong << 16) / capacity).toInt

  /**
   * Reorders `keys(from until until)`, all of `scope`, by their home slot in an index sized for
   * `expectedKeys`: added in that order, they fill its table front to back, where keys in the
   * order they were read each miss the cache once the table outgrows it (at 10^7 keys, adding
   * them took 0.7 s on the driver). Only the order changes, never what the index holds. Two
   * passes of a radix sort on the upper 16 bits of the slot; within one of those 65,536 stretches
   * of the table, order does not matter, as it stays in cache.
   */
  def orderForInsert(keys: Array[Long], from: Int, until: Int, scope: Long, expectedKeys: Long): Unit = {
    val n = until - from
    if (n < 2) return
    val capacity = tableSlotsFor(expectedKeys)
    // Each key's stretch hashed once, beside it through both passes (it was hashed in each).
    val stretches = new Array[Char](n)
    var i = 0
    while (i < n) { stretches(i) = stretch(homeSlot(keys(from + i), scope, capacity), capacity).toChar; i += 1 }
    val (sortedKeys, sortedStretches) = (new Array[Long](n), new Array[Char](n))
    def pass(keysIn: Array[Long], keysFrom: Int, stretchesIn: Array[Char], keysOut: Array[Long], outFrom: Int,
        stretchesOut: Array[Char], shift: Int): Unit = {
      val starts = new Array[Int](257)
      var i = 0
      while (i < n) { starts(((stretchesIn(i) >>> shift) & 0xFF) + 1) += 1; i += 1 }
      var b = 0
      while (b < 256) { starts(b + 1) += starts(b); b += 1 }
      i = 0
      while (i < n) {
        val digit = (stretchesIn(i) >>> shift) & 0xFF
        val to = starts(digit)
        keysOut(outFrom + to) = keysIn(keysFrom + i)
        if (stretchesOut != null) stretchesOut(to) = stretchesIn(i)
        starts(digit) = to + 1
        i += 1
      }
    }
    pass(keys, from, stretches, sortedKeys, 0, sortedStretches, 0)
    pass(sortedKeys, 0, sortedStretches, keys, from, null, 8)
  }

  /** Linear probing stays short (about 2 probes for a key present, 3-4 for one absent) up to this load. */
  private[deleteindex] val MaxLoad = 0.65

  /** A sealed index keeps a bitmap of its keys' range where that is at most this many bits a key (the key bitmap's budget). */
  private val DenseBitsPerKey = KeyBitmapIndex.MaxBitsPerKey

  /** Keys up to which a Bloom filter (16-32 bits a key) stays within a few MB of cache. */
  private val MaxBloomKeys = 2000000L

  /** Slots of the primitive table for `keys` keys, at most MaxLoad full. */
  private def tableSlotsFor(keys: Long): Int = checked(math.max(1024L, math.ceil(keys / MaxLoad).toLong + 1))

  private def checked(capacity: Long): Int = {
    require(2 * capacity <= Int.MaxValue - 8, s"${(capacity * MaxLoad).toLong} keys are too many for one index")
    capacity.toInt
  }

  /** The table for `keys` keys (two longs a slot), its Bloom filter and their headers, in bytes. */
  def bytesFor(keys: Long): Long =
    4096 + 16L * tableSlotsFor(keys) + (if (keys <= MaxBloomKeys) BlockedBloom.bytesFor(keys) else 0L) + DenseBitsPerKey * keys / 8 + 64

  private def bloomHash(key: Long): Long = {
    val h = key * 0x9E3779B97F4A7C15L
    h ^ (h >>> 31)
  }

  def supports(dataType: DataType): Boolean = dataType match {
    case IntegerType | LongType | DateType | TimestampType | TimestampNTZType | FloatType | DoubleType => true
    case _ => false
  }
}
