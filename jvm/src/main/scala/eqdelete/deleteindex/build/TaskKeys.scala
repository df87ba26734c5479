package eqdelete.deleteindex.build

import scala.collection.mutable.ArrayBuilder

import eqdelete.deleteindex.{HashedKeyIndex, KeyBitmapIndex, KeyBits, KeyBytes, LongKeyIndex, TwoLongKeyForm, TwoLongKeyIndex}

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.types.DataType

/**
 * One task's keys as they arrive (a primitive key's [[KeyBits]], a key's two longs, or other keys' hashes), run by
 * run of one scope and sequence number, kept in a plain long array (a Scala builder boxed each
 * key on its way in).
 */
private[build] final class TaskKeys(expectedRows: Long, twoLongs: Boolean = false) {
  private val keys = new Longs(expectedRows)
  // Keys' low longs (`twoLongs`), their high longs in `keys`.
  private val lows = if (twoLongs) new Longs(expectedRows) else null
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

  def reserve(rows: Int): Unit = {
    keys.reserve(rows)
    if (lows != null) lows.reserve(rows)
  }

  def add(key: Long): Unit = {
    require(lows == null, "a key in two longs comes as a pair (addPair)")
    keys.add(key)
  }

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

  /** A key's two longs. */
  def addPair(high: Long, low: Long): Unit = {
    keys.add(high)
    lows.add(low)
  }

  /** The batch of keys in `form`, each run's keys in the order a TwoLongKeyIndex sized for `indexKeys` fills its table. */
  def pairs(indexKeys: Long, form: TwoLongKeyForm): DeleteRowBatch = {
    closeRun()
    val (highs, lowHalves) = (keys.result(), lows.result())
    val byRun = runs.result()
    var (start, run) = (0, 0)
    while (run < byRun.length) {
      TwoLongKeyIndex.orderForInsert(highs, lowHalves, start, byRun(run).toInt, byRun(run + 1), indexKeys)
      start = byRun(run).toInt
      run += 3
    }
    new DeleteRowBatch(highs, byRun, Array.emptyLongArray, Array.emptyByteArray, 0L, indexKeys, lowHalves, form)
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
    new DeleteRowBatch(orderedHashes, byRun, Array.emptyLongArray, orderedPacked, 0L, indexKeys)
  }
}

/** A growing long array: one per task, millions of keys, where a Scala builder boxed each key (2.13). */
private[build] final class Longs(expected: Long) {
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
