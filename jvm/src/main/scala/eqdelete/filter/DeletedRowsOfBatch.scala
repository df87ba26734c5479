package eqdelete.filter

import eqdelete.deleteindex.{DeleteKeyIndex, HashedKeyIndex, KeyBytes, TwoLongKeyIndex}

import org.apache.spark.broadcast.Broadcast
import org.apache.spark.sql.catalyst.expressions.Expression
import org.apache.spark.sql.execution.vectorized.WritableColumnVector
import org.apache.spark.sql.types.{DataType, LongType, StringType}
import org.apache.spark.sql.vectorized.ColumnarBatch

/**
 * What one [[EqualityDeleteMatch]] asks of a columnar batch, bound to the batch's columns: its
 * index, its key columns (top-level, by ordinal), and the scope and sequence number of a row
 * (bound expressions), which are the same for every row of a run of rows with equal
 * `runOrdinals` (the `_file` column: a batch is read from one data file). Shipped to the tasks.
 */
private[filter] final case class BatchDeleteLookup(
    index: Broadcast[DeleteKeyIndex],
    keyOrdinals: Array[Int],
    keyTypes: Array[DataType],
    scope: Expression,
    sequence: Expression,
    runOrdinals: Array[Int],
    runTypes: Array[DataType]) {
  require(runTypes.forall(BatchDeleteLookup.runTypeSupported), s"runs of rows by columns of types ${runTypes.mkString(", ")}")

  /** One task's lookups, with its own scratch room. */
  def forTask(): DeletedRowsOfBatch = new DeletedRowsOfBatch(this)
}

private[filter] object BatchDeleteLookup {
  /** Keys looked up together: past about a thousand, the lines they touch no longer fit the TLB (notes of 2026-12-06). */
  val Part = 256

  def runTypeSupported(t: DataType): Boolean = t == StringType || t == LongType
}

/**
 * Marks the rows of a batch that `lookup`'s delete rows delete. A hashed or two-long index looks up
 * up to `Part` keys together ([[HashedKeyIndex.newestAll]], [[TwoLongKeyIndex.newestAll]]): their
 * cache misses overlap, where one row at a time waited for each miss in turn. Any other index
 * (the plan said hashed; never expected) is asked one row at a time, boxed.
 */
private[filter] final class DeletedRowsOfBatch(lookup: BatchDeleteLookup) {
  import BatchDeleteLookup.Part

  private val index = lookup.index.value
  private val keys = new KeyBytes
  private val hashes = new Array[Long](Part)
  private val offsets = new Array[Int](Part + 1)
  private val newest = new Array[Long](Part)
  private val entries = new Array[Long](Part)
  private val halves = new Array[Long](2 * Part)
  private val parsed = new Array[Boolean](Part)

  /** Sets `out`'s rows 0 until the batch's row count to whether each row is deleted. */
  def mark(batch: ColumnarBatch, out: WritableColumnVector): Unit = {
    val n = batch.numRows
    var start = 0
    while (start < n) {
      val end = runEnd(batch, start, n)
      val first = batch.getRow(start)
      val scope = lookup.scope.eval(first).asInstanceOf[Long]
      val sequence = lookup.sequence.eval(first).asInstanceOf[Long]
      var from = start
      while (from < end) {
        val until = math.min(end, from + Part)
        markPart(batch, from, until, scope, sequence, out)
        from = until
      }
      start = end
    }
  }

  /** Rows `from` until `until`, of one scope and sequence number. */
  private def markPart(batch: ColumnarBatch, from: Int, until: Int, scope: Long, sequence: Long, out: WritableColumnVector): Unit = {
    index match {
      case hashed: HashedKeyIndex =>
        keys.reset()
        var i = 0
        while (i < until - from) {
          val before = keys.length
          offsets(i) = before
          val hash = keys.putKey(batch.getRow(from + i), lookup.keyOrdinals, lookup.keyTypes)
          hashes(i) = hash
          // newestAll skips what the Bloom filter rules out; its bytes need not stay.
          if (!hashed.mightContain(hash)) keys.truncate(before)
          i += 1
        }
        offsets(i) = keys.length
        hashed.newestAll(scope, hashes, keys.bytes, offsets, i, newest, entries)
      case pairs: TwoLongKeyIndex =>
        val (column, n, form) = (batch.column(lookup.keyOrdinals(0)), until - from, pairs.form)
        var i = 0
        while (i < n) {
          parsed(i) = !column.isNullAt(from + i) && form.read(column.getUTF8String(from + i), halves, 2 * i, 2 * i + 1)
          i += 1
        }
        pairs.newestAll(scope, halves, parsed, n, newest, entries)
      case other =>
        var i = 0
        while (i < until - from) {
          val row = batch.getRow(from + i)
          // A batch's row answers `get` of a NULL with a value: ask isNullAt first.
          val values = lookup.keyOrdinals.indices.map { k =>
            val at = lookup.keyOrdinals(k)
            if (row.isNullAt(at)) null else row.get(at, lookup.keyTypes(k))
          }
          newest(i) = other.newestOf(scope, values.toArray[Any])
          i += 1
        }
    }
    var i = 0
    while (i < until - from) {
      out.putBoolean(from + i, newest(i) != DeleteKeyIndex.NoDelete && sequence < newest(i))
      i += 1
    }
  }

  /** The end of the run of rows from `start` whose run columns equal `start`'s. */
  private def runEnd(batch: ColumnarBatch, start: Int, n: Int): Int = {
    var end = n
    var c = 0
    while (c < lookup.runOrdinals.length) {
      val column = batch.column(lookup.runOrdinals(c))
      var e = start + 1
      if (lookup.runTypes(c) == StringType) {
        val first = if (column.isNullAt(start)) null else column.getUTF8String(start)
        while (e < end && sameString(first, column, e)) e += 1
      } else {
        val firstNull = column.isNullAt(start)
        val first = if (firstNull) 0L else column.getLong(start)
        while (e < end && column.isNullAt(e) == firstNull && (firstNull || column.getLong(e) == first)) e += 1
      }
      end = e
      c += 1
    }
    end
  }

  // Iceberg's readers hand out `_file` as one constant object per file: usually the same object.
  private def sameString(first: org.apache.spark.unsafe.types.UTF8String, column: org.apache.spark.sql.vectorized.ColumnVector, e: Int): Boolean =
    if (column.isNullAt(e)) first == null
    else {
      val value = column.getUTF8String(e)
      (value eq first) || (first != null && first == value)
    }
}
