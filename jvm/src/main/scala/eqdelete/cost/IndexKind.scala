package eqdelete.cost

import eqdelete.deleteindex.{DeleteKeyIndex, KeyBitmapIndex}
import eqdelete.planning.EqualityDeleteSet

import org.apache.spark.sql.types.{DataType, DateType, IntegerType, LongType}

/** Which index the filter builds of one equality set, decided from metadata with the rest of the plan. */
sealed trait IndexKind {
  def describe: String
  /** What EXPLAIN adds after the index's files and rows. */
  def detail: String = ""
}

object IndexKind {
  /**
   * A key -> newest delete table: [[eqdelete.deleteindex.LongKeyIndex]] or [[eqdelete.deleteindex.HashedKeyIndex]] by key
   * type, or [[eqdelete.deleteindex.TwoLongKeyIndex]] for a string key once its delete keys are
   * read and all UUIDs, or all strings of at most 15 bytes.
   */
  case object Table extends IndexKind {
    val describe = "index"
  }

  /**
   * [[KeyBitmapIndex]] over `lower .. upper`, the key's bounds in the delete files' metadata,
   * whose files are all newer than `oldestSequenceNumber - 1`, the oldest of them.
   */
  final case class KeyBitmap(lower: Long, upper: Long, oldestSequenceNumber: Long) extends IndexKind {
    def bits: Long = upper - lower + 1
    def describe: String = "key bitmap index"
    override def detail: String = s", keys $lower .. $upper, every delete newer than every data file read"
  }

  /**
   * [[KeyBitmap]] where sequence numbers cannot matter and the keys are dense: one int, long or
   * date key; every delete file global (so its keys delete in every partition) and newer than
   * `newestDataSequenceNumber`, the newest data file the scan reads (so it deletes every row of
   * its keys); the key's bounds in every file's metrics; and a range of at most
   * `KeyBitmapIndex.MaxBitsPerKey` bits a delete row. Else [[Table]].
   */
  def of(set: EqualityDeleteSet, keyTypes: Seq[DataType], newestDataSequenceNumber: Long): IndexKind = keyTypes match {
    case Seq(IntegerType | LongType | DateType)
        if set.files.nonEmpty && set.files.forall(_.isGlobal) && oldestOf(set) > newestDataSequenceNumber =>
      val id = Integer.valueOf(set.equalityIds.head)
      val bounds = set.files.map { ref =>
        def bound(of: java.util.Map[Integer, java.nio.ByteBuffer]) = Option(of).flatMap(m => Option(m.get(id))).flatMap(decode)
        (bound(ref.file.lowerBounds()), bound(ref.file.upperBounds()))
      }
      if (bounds.exists { case (lower, upper) => lower.isEmpty || upper.isEmpty }) Table
      else {
        val (lower, upper) = (bounds.map(_._1.get).min, bounds.map(_._2.get).max)
        val span = upper - lower // as unsigned: exact for any two longs
        val dense = lower <= upper &&
          java.lang.Long.compareUnsigned(span, KeyBitmapIndex.MaxBitsPerKey * math.max(1L, set.records)) < 0 &&
          java.lang.Long.compareUnsigned(span >>> 6, KeyBitmapIndex.MaxWords - 1) < 0
        if (dense) KeyBitmap(lower, upper, oldestOf(set)) else Table
      }
    case _ => Table
  }

  private def oldestOf(set: EqualityDeleteSet): Long = set.files.map(_.sequenceNumber).min

  /** Bytes the index of `set` as `kind` takes on the driver, at most. */
  def estimatedBytes(kind: IndexKind, set: EqualityDeleteSet, keyTypes: Seq[DataType]): Long = kind match {
    case bitmap: KeyBitmap => KeyBitmapIndex.bytesFor(bitmap.bits)
    case Table => DeleteKeyIndex.estimatedBytes(keyTypes, set.records, set.newestSequenceNumber)
  }

  // Metrics hold a value in Iceberg's single-value serialization, little-endian: an int or date
  // as 4 bytes, a long as 8 (a file written before the column became a long keeps 4).
  private def decode(bytes: java.nio.ByteBuffer): Option[Long] = {
    val value = bytes.duplicate().order(java.nio.ByteOrder.LITTLE_ENDIAN)
    value.remaining() match {
      case 4 => Some(value.getInt(value.position()).toLong)
      case 8 => Some(value.getLong(value.position()))
      case _ => None
    }
  }
}
