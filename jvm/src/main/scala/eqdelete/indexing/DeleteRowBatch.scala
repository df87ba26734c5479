package eqdelete.indexing

import scala.collection.mutable.ArrayBuilder

import eqdelete.index.{DeleteKeyIndex, HashedKeyIndex, KeyBits, KeyBytes, KeyHash, LongKeyIndex}

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.types.DataType

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
    packed: Array[Byte],
    val covered: Long)
  extends Serializable {

  /** The same rows, and `n` rows dropped as covered before them. */
  def withCovered(n: Long): DeleteRowBatch = new DeleteRowBatch(keys, runs, nullKeys, packed, n)

  def addTo(index: DeleteKeyIndex): Unit = {
    var start = 0
    var at = 0 // in `packed`
    var run = 0
    while (run < runs.length) {
      val (end, scope, seq) = (runs(run).toInt, runs(run + 1), runs(run + 2))
      index match {
        case hashed: HashedKeyIndex =>
          var i = start
          while (i < end) {
            val length = KeyBytes.readLength(packed, at)
            hashed.addPacked(keys(i), scope, packed, at + KeyBytes.LengthBytes, length, seq)
            at += KeyBytes.LengthBytes + length
            i += 1
          }
        case longs: LongKeyIndex =>
          var i = start
          while (i < end) {
            longs.addBits(scope, keys(i), seq)
            i += 1
          }
      }
      start = end
      run += 3
    }
    addNullKeysTo(index)
  }

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
   * Adds `batches` to a primitive index in one pass over its table, stretch by stretch: each
   * batch's runs come ordered by stretch (see `apply`). Added batch by batch, each batch walked
   * the whole table again, a cache miss a key once the table outgrows the cache: at 3x10^7 keys
   * in 30 batches, that took the driver 1.4 s (the scale benchmark's delete axis).
   * Each run waits in the list of the stretch its next key lands in, so the pass costs the keys
   * and the stretches, not stretches times runs (a run per delete file: Flink writes many).
   * A key out of order (an index sized otherwise) is added with the keys before it, never left out.
   */
  def addInSlotOrder(batches: Seq[DeleteRowBatch], index: LongKeyIndex): Unit = {
    val runs = for (batch <- batches; run <- batch.runs.indices by 3) yield (batch, run)
    val keys = runs.map(_._1.keys).toArray
    val positions = runs.map { case (batch, run) => if (run == 0) 0 else batch.runs(run - 3).toInt }.toArray
    val ends = runs.map { case (batch, run) => batch.runs(run).toInt }.toArray
    val scopes = runs.map { case (batch, run) => batch.runs(run + 1) }.toArray
    val sequences = runs.map { case (batch, run) => batch.runs(run + 2) }.toArray
    // Per stretch, the first run waiting there, and per run the next one waiting with it (-1: none).
    val waiting = Array.fill(LongKeyIndex.Stretches)(-1)
    val nextWaiting = new Array[Int](keys.length)
    def wait(r: Int): Unit = if (positions(r) < ends(r)) {
      val stretch = index.stretchOf(keys(r)(positions(r)), scopes(r))
      nextWaiting(r) = waiting(stretch)
      waiting(stretch) = r
    }
    keys.indices.foreach(wait)
    var stretch = 0
    while (stretch < LongKeyIndex.Stretches) {
      var r = waiting(stretch)
      while (r >= 0) {
        val following = nextWaiting(r)
        val runKeys = keys(r)
        val end = ends(r)
        val scope = scopes(r)
        val seq = sequences(r)
        var at = positions(r)
        // Up to the first key of a later stretch, so the run waits only ahead of this one.
        while (at < end && index.stretchOf(runKeys(at), scope) <= stretch) {
          index.addBits(scope, runKeys(at), seq)
          at += 1
        }
        positions(r) = at
        wait(r)
        r = following
      }
      stretch += 1
    }
    batches.foreach(_.addNullKeysTo(index))
  }

  /**
   * The batch of `rows`: (key values..., scope, seq) as [[eqdelete.read.DeleteRows]] reads
   * them; `primitive`: for a [[LongKeyIndex]] sized for `indexKeys` keys, whose keys come in
   * the order that index fills its table in (`LongKeyIndex.orderForInsert`), else for a
   * [[HashedKeyIndex]].
   */
  def apply(rows: Iterator[InternalRow], keyTypes: Seq[DataType], primitive: Boolean, indexKeys: Long,
      expectedRows: Long = 0): DeleteRowBatch = {
    val keys = new ArrayBuilder.ofLong
    keys.sizeHint(math.min(expectedRows, Int.MaxValue - 8L).toInt)
    val runs = new ArrayBuilder.ofLong
    val nulls = new ArrayBuilder.ofLong
    val types = keyTypes.toArray
    val (scopeAt, seqAt) = (types.length, types.length + 1)
    var count = 0
    var (scope, seq) = (0L, 0L) // of the open run; sequence numbers start at 1, so none is open yet
    def closeRun(): Unit = if (count > 0) runs += count += scope += seq
    def addKey(row: InternalRow, key: Long): Unit = {
      val (rowScope, rowSeq) = (row.getLong(scopeAt), row.getLong(seqAt))
      if (rowSeq != seq || rowScope != scope) {
        closeRun()
        scope = rowScope
        seq = rowSeq
      }
      keys += key
      count += 1
    }
    if (primitive) {
      val keyType = types(0)
      rows.foreach { row =>
        if (row.isNullAt(0)) nulls += row.getLong(scopeAt) += row.getLong(seqAt)
        else addKey(row, KeyBits.at(row, 0, keyType))
      }
      closeRun()
      val (ordered, byRun) = (keys.result(), runs.result())
      var (start, run) = (0, 0)
      while (run < byRun.length) {
        LongKeyIndex.orderForInsert(ordered, start, byRun(run).toInt, byRun(run + 1), indexKeys)
        start = byRun(run).toInt
        run += 3
      }
      new DeleteRowBatch(ordered, byRun, nulls.result(), Array.emptyByteArray, 0L)
    } else {
      val key = new KeyBytes
      val values = new Array[Any](types.length)
      val packed = new java.io.ByteArrayOutputStream()
      val length = new Array[Byte](KeyBytes.LengthBytes)
      rows.foreach { row =>
        var i = 0
        while (i < types.length) {
          values(i) = row.get(i, types(i))
          i += 1
        }
        KeyBytes.pack(types, values, key)
        addKey(row, KeyHash.of(values))
        KeyBytes.writeLength(length, 0, key.length)
        packed.write(length)
        packed.write(key.bytes, 0, key.length)
      }
      closeRun()
      new DeleteRowBatch(keys.result(), runs.result(), Array.emptyLongArray, packed.toByteArray, 0L)
    }
  }
}
