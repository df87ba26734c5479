package eqdelete.rowimages

import java.io.File
import java.nio.ByteBuffer

import scala.collection.mutable

import eqdelete.deleteindex.KeyBytes
import eqdelete.liveindex.LiveKeyStore
import eqdelete.state.RocksStore

/**
 * One partition of a table's row images by key: every live row's whole value (Spark's UnsafeRow
 * bytes), with the versions (snapshot sequence numbers) that added and removed it, in a RocksDB
 * on the local disk of the executor that holds the partition. Versions make a lookup at any
 * version the store still answers for give that version's rows, however far the store was brought
 * forward since: a plan made earlier reads what it was planned on, and bringing the store forward
 * again, as a retried task does, changes nothing.
 *
 * An entry's RocksDB key is the key's prefix ([[LiveKeyStore.keyPrefix]]: one key's entries lie
 * together), the version that added it, and its data file's id and position (what tells two rows
 * of one key apart); its value is the version that removed it ([[Live]] while live) and the row.
 * Every version of it is checkpointed to durable storage ([[RocksStore]]), whence any executor loads it.
 */
final class RowImageStore private (directory: File) extends RocksStore(directory) {
  import RowImageStore._

  /** Versions below this one were purged: lookups there cannot be answered. */
  @volatile private var answersFrom = Long.MinValue

  override def properties: Map[String, String] = Map(AnswersFrom -> answersFrom.toString)
  override def restore(properties: Map[String, String]): Unit = properties.get(AnswersFrom).foreach(v => answersFrom = v.toLong)

  /** Adds entries (RocksDB key and value) given in RocksDB's order, as one sorted file: how a store is loaded. */
  def ingestSorted(entries: Iterator[(Array[Byte], Array[Byte])]): Long = ingest(entries)

  /**
   * Applies changes given in [[LiveKeyStore.EntryOrdering]] (a key's together, by version, a
   * version's deletes first): a delete at version v marks each entry of its key added before v
   * and live as removed at v; an insert adds its entry, unless the store holds it already. So
   * applying them again is applying them once. How many entries were (inserted, removed).
   */
  def apply(changes: Iterator[(Array[Byte], Array[Byte])]): (Long, Long) = {
    val it = db.newIterator()
    var (inserted, removed) = (0L, 0L)
    try {
      var prefix: Array[Byte] = null
      // The current key's entries: those live with their values (what a delete marks), all by name (what an insert may repeat).
      val ofKey = mutable.LinkedHashMap.empty[ByteBuffer, Array[Byte]]
      val seen = mutable.Set.empty[ByteBuffer]
      val dirty = mutable.Set.empty[ByteBuffer]
      def done(): Unit = {
        dirty.foreach(k => put(k.array(), ofKey(k)))
        ofKey.clear(); seen.clear(); dirty.clear()
      }
      changes.foreach { case (change, row) =>
        val length = KeyBytes.LengthBytes + KeyBytes.readLength(change, 0)
        if (prefix == null || prefix.length != length || !java.util.Arrays.equals(change, 0, length, prefix, 0, length)) {
          done()
          prefix = java.util.Arrays.copyOf(change, length)
          it.seek(prefix)
          while (it.isValid && LiveKeyStore.hasPrefix(it.key(), prefix, EntryTail)) {
            val entry = ByteBuffer.wrap(it.key())
            seen += entry
            if (KeyBytes.readLong(it.value(), 0) == Live) ofKey(entry) = it.value()
            it.next()
          }
          ended(it)
        }
        val version = KeyBytes.readLong(change, length)
        if (change(length + 8) == DeleteMark) {
          ofKey.foreach { case (entry, value) =>
            if (KeyBytes.readLong(value, 0) == Live && KeyBytes.readLong(entry.array(), length) < version) {
              val marked = value.clone()
              KeyBytes.writeLong(marked, 0, version)
              ofKey(entry) = marked
              dirty += entry
              removed += 1
            }
          }
        } else if (change(length + 8) == RemoveMark) {
          // One entry by name (its key's prefix, then what follows the mark), as a sink removes the
          // rows it matched whole: the key's other rows stay.
          val bytes = new Array[Byte](change.length - 9)
          System.arraycopy(change, 0, bytes, 0, length)
          System.arraycopy(change, length + 9, bytes, length, change.length - length - 9)
          val entry = ByteBuffer.wrap(bytes)
          ofKey.get(entry).filter(value => KeyBytes.readLong(value, 0) == Live && KeyBytes.readLong(bytes, length) < version).foreach { value =>
            val marked = value.clone()
            KeyBytes.writeLong(marked, 0, version)
            ofKey(entry) = marked
            dirty += entry
            removed += 1
          }
        } else {
          // The change less its mark: the entry.
          val bytes = new Array[Byte](change.length - 1)
          System.arraycopy(change, 0, bytes, 0, length + 8)
          System.arraycopy(change, length + 9, bytes, length + 8, change.length - length - 9)
          val entry = ByteBuffer.wrap(bytes)
          if (seen.add(entry)) {
            ofKey(entry) = liveValue(row)
            dirty += entry
            inserted += 1
          }
        }
      }
      done()
      flush()
    } catch {
      case e: Throwable =>
        // What was not written stays unwritten: the caller drops the store, or applies it all again.
        discardPending()
        throw e
    } finally it.close()
    (inserted, removed)
  }

  /** Lookups through one iterator, best given keys in the store's order; close it when done. */
  def cursor(): Cursor = new Cursor(db.newIterator())

  final class Cursor private[RowImageStore] (it: org.rocksdb.RocksIterator) extends AutoCloseable {
    /** The rows of the key whose prefix is `prefix` live at `version`, calling `found` with each row's bytes. */
    def rowsAt(prefix: Array[Byte], version: Long)(found: Array[Byte] => Unit): Unit =
      entriesAt(prefix, version)((_, row) => found(row))

    /** As [[rowsAt]], calling `found` with each row's entry (what names it: [[RowImageStore.removeChange]]) too. */
    def entriesAt(prefix: Array[Byte], version: Long)(found: (Array[Byte], Array[Byte]) => Unit): Unit = {
      if (version < answersFrom) {
        throw new IllegalStateException(s"eqdelete: kept row images no longer hold the rows of version $version " +
          s"(they were purged below version $answersFrom since this plan was made); run the query again")
      }
      it.seek(prefix)
      // A key's entries lie in the order of the versions that added them: none after `version` counts.
      while (it.isValid && LiveKeyStore.hasPrefix(it.key(), prefix, EntryTail) && KeyBytes.readLong(it.key(), prefix.length) <= version) {
        val value = it.value()
        if (KeyBytes.readLong(value, 0) > version) found(it.key(), java.util.Arrays.copyOfRange(value, 8, value.length))
        it.next()
      }
      ended(it)
    }

    override def close(): Unit = it.close()
  }

  /**
   * Removes every entry removed at or before `version`: lookups at `version` and later still
   * find what they found, earlier ones fail. How many.
   */
  def purge(version: Long): Long = {
    operation(PurgeVersion, ByteBuffer.allocate(8).putLong(version).array())
    purged(version)
  }

  private def purged(version: Long): Long = {
    flush()
    answersFrom = math.max(answersFrom, version)
    val it = db.newIterator()
    var n = 0L
    try {
      it.seekToFirst()
      while (it.isValid) {
        if (KeyBytes.readLong(it.value(), 0) <= version) { deleteUnrecorded(it.key()); n += 1 }
        it.next()
      }
      ended(it)
    } finally it.close()
    if (n > 0) compact()
    n
  }

  override protected def replayOperation(code: Int, payload: Array[Byte]): Unit = code match {
    case PurgeVersion => purged(ByteBuffer.wrap(payload).getLong)
    case other => throw new IllegalStateException(s"eqdelete: a row images store cannot replay operation $other")
  }
}

object RowImageStore {
  private val PurgeVersion = 1
  private val AnswersFrom = "answersFrom"

  /** The removed version of a live entry. */
  val Live: Long = Long.MaxValue
  /** Bytes after a key's prefix in an entry: the added version, the file id, the position. */
  private val EntryTail = 8 + 4 + 8
  private val DeleteMark: Byte = 0
  private val InsertMark: Byte = 1
  private val RemoveMark: Byte = 2

  /** A store over a RocksDB directory (empty, or loaded from a checkpoint). */
  def open(directory: File): RowImageStore = new RowImageStore(directory)

  /** A new, empty store in a fresh directory under `parent`. */
  def create(parent: File, name: String): RowImageStore = open(RocksStore.freshDirectory(parent, name))

  /** A live row's entry (RocksDB key) of a key's packed bytes, added at `version`, at `file`'s `position`. */
  def entry(key: Array[Byte], version: Long, file: Int, position: Long): Array[Byte] =
    ByteBuffer.allocate(4 + key.length + EntryTail).putInt(key.length).put(key).putLong(version).putInt(file)
      .putLong(position).array()

  /** An entry's value while live: [[Live]], then the row's bytes. */
  def liveValue(row: Array[Byte]): Array[Byte] = ByteBuffer.allocate(8 + row.length).putLong(Live).put(row).array()

  /** A change deleting a key's rows at `version` (sorts before the version's inserts of the key). */
  def deleteChange(key: Array[Byte], version: Long): Array[Byte] =
    ByteBuffer.allocate(4 + key.length + 9).putInt(key.length).put(key).putLong(version).put(DeleteMark).array()

  /**
   * A change removing at `version` the one row whose entry is `entry` (as [[Cursor.entriesAt]]
   * gave it), if it is live and was added before: the key's other rows stay.
   */
  def removeChange(entry: Array[Byte], version: Long): Array[Byte] = {
    val length = KeyBytes.LengthBytes + KeyBytes.readLength(entry, 0)
    ByteBuffer.allocate(entry.length + 9).put(entry, 0, length).putLong(version).put(RemoveMark)
      .put(entry, length, entry.length - length).array()
  }

  /** The data file id and the position an entry names. */
  def fileOf(entry: Array[Byte]): Int = ByteBuffer.wrap(entry, entry.length - 12, 4).getInt
  def positionOf(entry: Array[Byte]): Long = KeyBytes.readLong(entry, entry.length - 8)

  /** A change inserting a row of a key at `version` (its bytes go beside, as the change's value). */
  def insertChange(key: Array[Byte], version: Long, file: Int, position: Long): Array[Byte] =
    ByteBuffer.allocate(4 + key.length + 9 + 12).putInt(key.length).put(key).putLong(version).put(InsertMark).putInt(file)
      .putLong(position).array()
}
