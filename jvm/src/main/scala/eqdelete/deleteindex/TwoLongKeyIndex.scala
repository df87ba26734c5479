package eqdelete.deleteindex

import org.apache.spark.sql.types.{DataType, StringType}
import org.apache.spark.unsafe.types.UTF8String

/**
 * One string key whose delete keys are all in one [[TwoLongKeyForm]] (UUIDs in canonical form,
 * or strings of at most 15 bytes): each key as its two longs, in an open-addressing table of
 * (high long, low long, scope and sequence number) triples, as [[LongKeyIndex]] holds one long
 * key. A lookup reads the row's key into two longs (no allocation) and loads one slot: the
 * hashed index loaded a slot and then the record it points at, two cache misses in a row, and
 * its read tasks hashed and packed 40 bytes a UUID where these ship 16 (at 10^7 UUID strings,
 * the index and the lookups were most of the query).
 *
 * A data key not in the form equals no delete key (the form is injective both ways). The read
 * tasks find out whether every delete key is in one form (a NULL is in none); where not, the
 * set gets the hashed index ([[eqdelete.deleteindex.build.DeleteIndexBuilder]]).
 */
final class TwoLongKeyIndex(expectedKeys: Long, val form: TwoLongKeyForm) extends DeleteKeyIndex {
  import TwoLongKeyIndex.{Empty, LineLongs, SequenceBits, Width}

  private var capacity = TwoLongKeyIndex.tableSlotsFor(expectedKeys)
  private var slots = new Array[Long](Width * capacity)
  private var used = 0
  // As LongKeyIndex's: only while it stays in cache, filled as keys are added.
  private val bloom: BlockedBloom =
    if (expectedKeys <= TwoLongKeyIndex.MaxBloomKeys) BlockedBloom.forKeys(expectedKeys.toInt) else null
  private var isSealed = false

  def distinctKeys: Int = used

  override def seal(): this.type = { isSealed = true; this }

  protected def put(scope: Long, values: Array[Any], sequenceNumber: Long): Unit = {
    val bits = new Array[Long](2)
    require(values(0).isInstanceOf[UTF8String] && form.read(values(0).asInstanceOf[UTF8String], bits, 0, 1),
      s"key ${values(0)} is not one of ${form.describe}") // the builder gives such sets the hashed index
    require(!isSealed, "the index is sealed")
    insert(bits(0), bits(1), scope, sequenceNumber)
  }

  /** `add` of a key given as its two halves. */
  def addBits(scope: Long, high: Long, low: Long, sequenceNumber: Long): Unit = {
    require(!isSealed, "the index is sealed")
    noteScope(scope, sequenceNumber)
    insert(high, low, scope, sequenceNumber)
  }

  def newestOf(scope: Long, values: Array[Any]): Long = values(0) match {
    case key: UTF8String => newestOf(scope, key, new Array[Long](2))
    case _ => DeleteKeyIndex.NoDelete // NULL: this index has no NULL key
  }

  /** The newest delete of `key` (or NULL) in `scope` or globally; `scratch`, two longs of the caller's (generated code's). */
  def newestOf(scope: Long, key: UTF8String, scratch: Array[Long]): Long =
    if (!form.read(key, scratch, 0, 1)) DeleteKeyIndex.NoDelete else newest(scope, scratch(0), scratch(1))

  /** The newest delete of the key of these halves in `scope` or globally, or NoDelete. */
  def newest(scope: Long, high: Long, low: Long): Long =
    if (bloom != null && !bloom.mightContain(TwoLongKeyIndex.bloomHash(high, low))) DeleteKeyIndex.NoDelete
    else {
      val global = if (hasGlobal) lookup(high, low, DeleteKeyIndex.GlobalScope) else DeleteKeyIndex.NoDelete
      if (scoped && scope != DeleteKeyIndex.GlobalScope) math.max(global, lookup(high, low, scope)) else global
    }

  /**
   * `newest` of `n` keys at once, key i's halves at `halves(2i)` and `halves(2i + 1)` where
   * `parsed(i)`, else not in the form (no delete), its newest delete into `out(i)`: first the home slot of
   * every key loaded, in a loop of loads that do not wait on one another (so the core overlaps
   * their cache misses, see `HashedKeyIndex.newestAll`), then the lookups, which find them in
   * cache. `out` and `entries` (at least `n` longs) are the caller's own.
   */
  def newestAll(scope: Long, halves: Array[Long], parsed: Array[Boolean], n: Int, out: Array[Long], entries: Array[Long]): Unit = {
    if (hasGlobal) prefetch(DeleteKeyIndex.GlobalScope, halves, parsed, n, entries)
    if (scoped && scope != DeleteKeyIndex.GlobalScope) prefetch(scope, halves, parsed, n, entries)
    var i = 0
    while (i < n) {
      out(i) = if (parsed(i)) newest(scope, halves(2 * i), halves(2 * i + 1)) else DeleteKeyIndex.NoDelete
      i += 1
    }
  }

  // Only keys the Bloom filter (if any) lets through, as `newest` looks them up. What a load read goes to
  // `entries`, which nothing reads after, so that the JIT keeps the load.
  private def prefetch(scope: Long, halves: Array[Long], parsed: Array[Boolean], n: Int, entries: Array[Long]): Unit = {
    var i = 0
    while (i < n) {
      val high = halves(2 * i)
      val low = halves(2 * i + 1)
      entries(i) =
        if (!parsed(i) || (bloom != null && !bloom.mightContain(TwoLongKeyIndex.bloomHash(high, low)))) 0L
        else {
          // The home slot's line and the next: a probe for a key not there walks ~2.5 slots (60 bytes) at this load.
          val at = Width * slot(high, low, scope)
          slots(at) + slots(math.min(at + LineLongs, slots.length - 1))
        }
      i += 1
    }
  }

  private def slot(high: Long, low: Long, scope: Long): Int = TwoLongKeyIndex.homeSlot(high, low, scope, capacity)

  /** Which of the table's `TwoLongKeyIndex.Stretches` stretches the key's home slot lies in (see `orderForInsert`). */
  def stretchOf(high: Long, low: Long, scope: Long): Int = TwoLongKeyIndex.stretch(slot(high, low, scope), capacity)

  /** The keys the table is sized for: a batch ordered for another size is not in its slot order. */
  def sizedFor: Long = expectedKeys

  private def next(i: Int): Int = if (i + 1 == capacity) 0 else i + 1

  private def lookup(high: Long, low: Long, scope: Long): Long = {
    var i = slot(high, low, scope)
    while (true) {
      val entry = slots(Width * i + 2)
      if (entry == Empty) return DeleteKeyIndex.NoDelete
      if (slots(Width * i) == high && slots(Width * i + 1) == low && (entry >> SequenceBits) == scope) return entry & TwoLongKeyIndex.MaxSequenceNumber
      i = next(i)
    }
    DeleteKeyIndex.NoDelete
  }

  /**
   * The table split into at most `parts` regions of whole stretches for threads to fill at once,
   * each only its own, as `LongKeyIndex.regions`: one where it keeps a Bloom filter (shared by
   * every region) or `keys` more keys could make it grow. `absorb` them once every thread is done.
   */
  def regions(parts: Int, keys: Long, runs: Seq[(Long, Long)]): IndexedSeq[TwoLongKeyIndex.Region] = {
    require(!isSealed, "the index is sealed")
    runs.foreach { case (scope, seq) => noteScope(scope, seq) }
    val whole = parts <= 1 || bloom != null || used + keys > capacity * TwoLongKeyIndex.MaxLoad
    StretchOrder.regions(parts, TwoLongKeyIndex.Stretches, whole).map { case (first, end) =>
      new TwoLongKeyIndex.Region(this, first, end, whole)
    }
  }

  /** Adds what `regions` kept aside (keys whose probe left their region) and counts their keys. */
  def absorb(regions: Seq[TwoLongKeyIndex.Region]): Unit = regions.foreach { region =>
    used += region.added
    region.keptAside.foreach { case (scope, high, low, seq) => insert(high, low, scope, seq) }
  }

  private def firstSlotOf(stretch: Int): Int =
    ((stretch.toLong * capacity + TwoLongKeyIndex.Stretches - 1) / TwoLongKeyIndex.Stretches).toInt

  /** Probes for the key from its home slot: its slot, or where it goes; -1 past `until` (the whole table: never). */
  private def probe(high: Long, low: Long, scope: Long, start: Int, until: Int): Int = {
    var i = start
    while (slots(Width * i + 2) != Empty &&
      !(slots(Width * i) == high && slots(Width * i + 1) == low && (slots(Width * i + 2) >> SequenceBits) == scope)) {
      i += 1
      if (i == until) return -1
      if (i == capacity) i = 0
    }
    i
  }

  /** Puts the key into slot `i` (from `probe`): true for a new key, else raises its sequence number. */
  private def write(i: Int, high: Long, low: Long, scope: Long, sequenceNumber: Long): Boolean = {
    val at = Width * i
    val entry = (scope << SequenceBits) | sequenceNumber
    if (slots(at + 2) == Empty) {
      slots(at) = high
      slots(at + 1) = low
      slots(at + 2) = entry
      if (bloom != null) bloom.add(TwoLongKeyIndex.bloomHash(high, low))
      true
    } else {
      if ((slots(at + 2) & TwoLongKeyIndex.MaxSequenceNumber) < sequenceNumber) slots(at + 2) = entry
      false
    }
  }

  private def checkPacks(scope: Long, sequenceNumber: Long): Unit =
    if (sequenceNumber > TwoLongKeyIndex.MaxSequenceNumber || scope != scope.toInt) {
      // The builder gives such sets the hashed index; reaching here is a bug, never a wrong row.
      throw new IndexCapacityException(s"delete sequence number $sequenceNumber or scope $scope is past the two-long index")
    }

  private[deleteindex] def insertWithin(high: Long, low: Long, scope: Long, sequenceNumber: Long, from: Int, until: Int): Int = {
    checkPacks(scope, sequenceNumber)
    val home = slot(high, low, scope)
    if (home < from || home >= until) return -1
    val i = probe(high, low, scope, home, until)
    if (i < 0) -1 else if (write(i, high, low, scope, sequenceNumber)) 1 else 0
  }

  private[deleteindex] def insert(high: Long, low: Long, scope: Long, sequenceNumber: Long): Unit = {
    checkPacks(scope, sequenceNumber)
    if (used + 1 > capacity * TwoLongKeyIndex.MaxLoad) grow()
    if (write(probe(high, low, scope, slot(high, low, scope), -1), high, low, scope, sequenceNumber)) used += 1
  }

  private def grow(): Unit = {
    val old = slots
    capacity = TwoLongKeyIndex.checked(2L * capacity)
    slots = new Array[Long](Width * capacity)
    used = 0
    var at = 0
    while (at < old.length) {
      if (old(at + 2) != Empty) insert(old(at), old(at + 1), old(at + 2) >> SequenceBits, old(at + 2) & TwoLongKeyIndex.MaxSequenceNumber)
      at += Width
    }
  }
}

object TwoLongKeyIndex {
  /** Stretches `firstStretch until endStretch` of `index`'s table, as `LongKeyIndex.Region`. */
  final class Region private[TwoLongKeyIndex] (index: TwoLongKeyIndex, val firstStretch: Int, val endStretch: Int, whole: Boolean) {
    private val (from, until) = (index.firstSlotOf(firstStretch), index.firstSlotOf(endStretch))
    private val aside = scala.collection.mutable.ArrayBuffer[(Long, Long, Long, Long)]()
    private[TwoLongKeyIndex] var added = 0

    def add(scope: Long, high: Long, low: Long, sequenceNumber: Long): Unit =
      if (whole) index.insert(high, low, scope, sequenceNumber)
      else index.insertWithin(high, low, scope, sequenceNumber, from, until) match {
        case 1 => added += 1
        case 0 =>
        case _ => aside += ((scope, high, low, sequenceNumber))
      }

    private[TwoLongKeyIndex] def keptAside: Seq[(Long, Long, Long, Long)] = aside.toSeq
  }

  /** The newest sequence number a slot holds, as LongKeyIndex's. */
  val MaxSequenceNumber: Long = 0xFFFFFFFFL
  private val SequenceBits = 32
  private val Empty = 0L
  // Longs a slot takes: high half, low half, scope and sequence number.
  private val Width = 3
  // Longs a cache line holds.
  private val LineLongs = 8
  // Half full: linear probing's walk for a key not there (most rows' keys) grows fast past it,
  // ~2.5 slots here against ~4.6 at LongKeyIndex's 0.65, and each slot is 24 bytes, not 16.
  private val MaxLoad = 0.5
  private val MaxBloomKeys = 2000000L

  /** Whether a set of these key types and newest sequence number may get this index, once its keys are read. */
  def mayIndex(types: Seq[DataType], newestSequenceNumber: Long): Boolean =
    types == Seq(StringType) && newestSequenceNumber <= MaxSequenceNumber

  private def tableSlotsFor(keys: Long): Int = checked(math.max(1024L, math.ceil(keys / MaxLoad).toLong + 1))

  private def checked(capacity: Long): Int = {
    require(Width * capacity <= Int.MaxValue - 8, s"${(capacity * MaxLoad).toLong} keys are too many for one index")
    capacity.toInt
  }

  /** The stretches a table is ordered by, for adding keys front to back. */
  val Stretches: Int = 1 << 16

  private def stretch(slot: Int, capacity: Int): Int = ((slot.toLong << 16) / capacity).toInt

  private def homeSlot(high: Long, low: Long, scope: Long, capacity: Int): Int = {
    val h = KeyHash.mix(high * 0x9E3779B97F4A7C15L + low * 0xD6E8FEB86659FD93L + scope * 0xC2B2AE3D27D4EB4FL)
    ((h >>> 32) * capacity >>> 32).toInt
  }

  // Mixed whole: a short string's bytes differ in few bits, and any of them must move the home slot.
  private def bloomHash(high: Long, low: Long): Long = KeyHash.mix(high ^ low * 0xC2B2AE3D27D4EB4FL)

  /**
   * Reorders the keys `from until until` (halves in `highs` and `lows`), all of `scope`, by their
   * home slot's stretch in an index sized for `expectedKeys`: added in that order they fill its
   * table front to back, as `LongKeyIndex.orderForInsert`.
   */
  def orderForInsert(highs: Array[Long], lows: Array[Long], from: Int, until: Int, scope: Long, expectedKeys: Long): Unit = {
    val n = until - from
    if (n < 2) return
    val capacity = tableSlotsFor(expectedKeys)
    val stretches = new Array[Char](n)
    var i = 0
    while (i < n) { stretches(i) = stretch(homeSlot(highs(from + i), lows(from + i), scope, capacity), capacity).toChar; i += 1 }
    val order = StretchOrder.of(stretches, n)
    val (h, l) = (java.util.Arrays.copyOfRange(highs, from, until), java.util.Arrays.copyOfRange(lows, from, until))
    i = 0
    while (i < n) { highs(from + i) = h(order(i)); lows(from + i) = l(order(i)); i += 1 }
  }
}
