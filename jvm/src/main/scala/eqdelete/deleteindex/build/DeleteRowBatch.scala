package eqdelete.deleteindex.build

import eqdelete.deleteindex.{DeleteKeyIndex, KeyBitmapIndex, TwoLongKeyForm, TwoLongKeyIndex}

import eqdelete.read.DeleteRowReader
import eqdelete.read.DeleteRows.TaskFile

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow
import org.apache.spark.sql.types.DataType

/**
 * The delete rows one task read, as it ships them: the keys in a long array (for one integral
 * or floating-point key its [[KeyBits]], for keys in a [[TwoLongKeyForm]] their high longs with
 * the low ones in `lows`, for other keys their hash, with the keys packed
 * ([[KeyBytes]]) one after the other, each after its 4-byte length), and, since every row of
 * a delete file has the file's scope and sequence number, those once per run of rows:
 * (end, scope, seq) triples. NULL keys of one column come as (scope, seq) pairs. 8 bytes a row
 * for one integral key, where (key, scope, seq) triples took 24: at 10^7 delete rows the
 * difference was most of what the tasks' results cost to ship (the scale benchmark).
 *
 * Built by the companion's builders (with [[TaskKeys]] and [[HashedKeys]]), added to an index
 * by [[DeleteRowBatchFilling]].
 */
final class DeleteRowBatch private[build] (
    private[build] val keys: Array[Long],
    private[build] val runs: Array[Long],
    nullKeys: Array[Long],
    private[build] val packed: Array[Byte],
    val covered: Long,
    // The keys of the index whose slot order each run's keys are in: only batches ordered for
    // the index's own size fill its regions on several threads.
    private[build] val orderedFor: Long = 0L,
    // For a TwoLongKeyIndex: each key's low long, its high long in `keys`, both in `form`.
    private[build] val lows: Array[Long] = null,
    val form: TwoLongKeyForm = null)
  extends Serializable {

  /** The same rows, and `n` rows dropped as covered before them. */
  def withCovered(n: Long): DeleteRowBatch = new DeleteRowBatch(keys, runs, nullKeys, packed, n, orderedFor, lows, form)

  /** Whether its keys are in a [[TwoLongKeyForm]] (`form`), as two longs for a [[TwoLongKeyIndex]]. */
  def inTwoLongs: Boolean = lows != null

  private[build] def addNullKeysTo(index: DeleteKeyIndex): Unit = {
    var i = 0
    while (i < nullKeys.length) {
      index.add(nullKeys(i), Array[Any](null), nullKeys(i + 1))
      i += 2
    }
  }
}

object DeleteRowBatch {
  /** Adds `batches` to `index` in one pass over its table ([[DeleteRowBatchFilling.addAll]]). */
  def addAll(batches: Seq[DeleteRowBatch], index: DeleteKeyIndex, threads: Int): Unit =
    DeleteRowBatchFilling.addAll(batches, index, threads)

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
   * The batch of one task's `files` for a [[TwoLongKeyIndex]] sized for `indexKeys` keys, their
   * single string key read as `ofHashedKeyColumns` reads it, in the form of the first key (a
   * UUID, or a string of at most 15 bytes); None at the first key in no form or in another, or
   * NULL: the set then gets a hashed index. For a longer string that is the first key read.
   */
  def ofTwoLongKeyColumns(files: Iterator[TaskFile], reader: DeleteRowReader, indexKeys: Long,
      expectedRows: Long): Option[DeleteRowBatch] = {
    val keys = new TaskKeys(expectedRows, twoLongs = true)
    val pair = new Array[Long](2)
    var form: TwoLongKeyForm = null
    def add(row: InternalRow, ordinal: Int): Unit = {
      val key = if (row.isNullAt(ordinal)) null else row.getUTF8String(ordinal)
      if (form == null) form = TwoLongKeyForm.of(key, pair).getOrElse(throw NotInForm)
      else if (!form.read(key, pair, 0, 1)) throw NotInForm
      keys.addPair(pair(0), pair(1))
    }
    val inBatch = reader.keyOrdinals(0)
    // Thrown out of the reading: its open file is closed when the task ends.
    try {
      eachRow(files, reader, keys)(add(_, inBatch), add(_, 0))
      Some(keys.pairs(indexKeys, form)) // no form where it read no key
    } catch { case NotInForm => None }
  }

  private object NotInForm extends scala.util.control.ControlThrowable

  /** One task's batch for a set `TwoLongKeyIndex.mayIndex`: in two longs, or, where a key is in no form (or another), hashed. */
  def ofTwoLongOrHashedKeyColumns(files: Iterator[TaskFile], reader: DeleteRowReader, keyTypes: Seq[DataType],
      indexKeys: Long, expectedRows: Long): DeleteRowBatch = {
    val all = files.toIndexedSeq
    ofTwoLongKeyColumns(all.iterator, reader, indexKeys, expectedRows)
      .getOrElse(ofHashedKeyColumns(all.iterator, reader, keyTypes, indexKeys, expectedRows))
  }

  /**
   * A batch of keys in two longs as a hashed index takes them, each key its string again
   * (another task read a key in no form or another one, so the set gets the hashed index); any
   * other batch as it is.
   */
  def asHashed(batch: DeleteRowBatch, keyTypes: Seq[DataType], indexKeys: Long): DeleteRowBatch =
    if (!batch.inTwoLongs) batch
    else {
      // One reused row, each key's string made as it is packed: nothing held per key but what the batch keeps.
      val row = new GenericInternalRow(3)
      var (run, at) = (0, 0)
      val rows = Iterator.continually {
        while (at == batch.runs(run)) run += 3
        row.update(0, batch.form.write(batch.keys(at), batch.lows(at)))
        row.setLong(1, batch.runs(run + 1))
        row.setLong(2, batch.runs(run + 2))
        at += 1
        row: InternalRow
      }.take(batch.keys.length)
      apply(rows, keyTypes, primitive = false, indexKeys, batch.keys.length).withCovered(batch.covered)
    }
}
