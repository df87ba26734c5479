package eqdelete.liveindex

import java.io.File
import java.nio.ByteBuffer

import eqdelete.state.RocksStore

import org.rocksdb.RocksIterator

/**
 * One partition of an index of a table's live rows by key: entries `(key, data file, position)`
 * in a RocksDB on the local disk of the executor that holds the partition, so the index is as
 * large as the disk allows while its memory stays bounded (RocksDB's memtables and block cache).
 * RocksDB's JNI library ships with every Spark line (its streaming state store uses it), so
 * this is no extra dependency.
 *
 * An entry is one RocksDB key and no value: the key's bytes (as [[eqdelete.deleteindex.KeyBytes]]
 * packs them: equal bytes, equal keys by Iceberg's equality) behind their 4-byte length, so no
 * key's entries are a prefix of another's, then the file's id (4 bytes) and the position (8),
 * big-endian, so one key's entries lie together and a lookup is one seek. Several rows of one
 * key (a key upserted and not yet resolved) are several entries.
 *
 * It is a [[RocksStore]]: every version of it is checkpointed to durable storage, whence any
 * executor loads it.
 */
final class LiveKeyStore private (directory: File) extends RocksStore(directory) {
  import LiveKeyStore._

  /** Adds an entry (visible to lookups once [[flush]]ed). */
  def add(key: Array[Byte], keyLength: Int, file: Int, position: Long): Unit = put(entry(key, keyLength, file, position), Empty)

  /** Removes an entry (from lookups once [[flush]]ed); removing one that is absent is no error. */
  def remove(key: Array[Byte], keyLength: Int, file: Int, position: Long): Unit = delete(entry(key, keyLength, file, position))

  /** The `(file, position)` of every entry of a key, calling `found` for each. */
  def lookup(key: Array[Byte], keyLength: Int)(found: (Int, Long) => Unit): Unit = {
    val c = cursor()
    try c.entriesOf(keyPrefix(key, keyLength))(found) finally c.close()
  }

  /**
   * A reader for many lookups: one RocksDB iterator they share (opening one per key costs more
   * than the seek), best given keys in the store's order so each seek moves forward. It sees the
   * store as it was when opened; close it when done.
   */
  def cursor(): Cursor = new Cursor(db.newIterator(), directory)

  /**
   * Adds entries given in RocksDB's order (bytewise, unsigned: [[EntryOrdering]]), as one sorted
   * file RocksDB takes in whole, past its memtables and compactions: how a store is loaded
   * from a table's rows once Spark has sorted them.
   */
  def ingestSorted(entries: Iterator[Array[Byte]]): Long = ingest(entries.map(e => (e, Empty)))

  /**
   * Removes every entry whose file id is in `gone` (files no longer in use, or read again under
   * a new id): one pass over the store, then a compaction so their bytes leave the disk. How many.
   */
  def purge(gone: Set[Int]): Long = {
    val payload = ByteBuffer.allocate(4 * gone.size)
    gone.foreach(payload.putInt)
    operation(PurgeFiles, payload.array())
    purged(gone)
  }

  private def purged(gone: Set[Int]): Long = {
    flush()
    val it = db.newIterator()
    var n = 0L
    try {
      it.seekToFirst()
      while (it.isValid) {
        val k = it.key()
        if (gone(ByteBuffer.wrap(k, k.length - 12, 4).getInt)) { deleteUnrecorded(k); n += 1 }
        it.next()
      }
      ended(it)
    } finally it.close()
    if (n > 0) compact()
    n
  }

  override protected def replayOperation(code: Int, payload: Array[Byte]): Unit = code match {
    case PurgeFiles =>
      val ids = ByteBuffer.wrap(payload)
      purged(Iterator.fill(payload.length / 4)(ids.getInt).toSet)
    case other => throw new IllegalStateException(s"eqdelete: a live-row index store cannot replay operation $other")
  }
}

object LiveKeyStore {
  /** Lookups through one iterator ([[LiveKeyStore.cursor]]), by a key's [[keyPrefix]]. */
  final class Cursor private[LiveKeyStore] (it: RocksIterator, directory: File) extends AutoCloseable {
    /** The `(file, position)` of every entry whose key is `prefix`'s, calling `found` for each. */
    def entriesOf(prefix: Array[Byte])(found: (Int, Long) => Unit): Unit = {
      it.seek(prefix)
      var more = true
      while (more && it.isValid) {
        val k = it.key()
        if (startsWith(k, prefix)) {
          val tail = ByteBuffer.wrap(k, prefix.length, 12)
          found(tail.getInt, tail.getLong)
          it.next()
        } else more = false
      }
      if (more) RocksStore.ended(it, directory)
    }

    override def close(): Unit = it.close()
  }

  private val Empty = new Array[Byte](0)
  private val PurgeFiles = 1

  /** A store over a RocksDB directory (empty, or loaded from a checkpoint). */
  def open(directory: File): LiveKeyStore = new LiveKeyStore(directory)

  /** A new, empty store in a fresh directory under `parent`. */
  def create(parent: File, name: String): LiveKeyStore = open(RocksStore.freshDirectory(parent, name))

  /** An entry as the store holds it. */
  def entry(key: Array[Byte], keyLength: Int, file: Int, position: Long): Array[Byte] =
    ByteBuffer.allocate(4 + keyLength + 12).putInt(keyLength).put(key, 0, keyLength).putInt(file).putLong(position).array()

  /** The index partition (of `partitions`) an entry's key belongs to: all of a key's entries in one store. */
  def partitionOf(entry: Array[Byte], partitions: Int): Int =
    home(entry, 4, 4 + ByteBuffer.wrap(entry).getInt(0), partitions)

  /** The index partition (of `partitions`) of a key's packed bytes: the one [[partitionOf]] gives its entries. */
  def partitionOfKey(key: Array[Byte], keyLength: Int, partitions: Int): Int = home(key, 0, keyLength, partitions)

  private def home(bytes: Array[Byte], from: Int, until: Int, partitions: Int): Int = {
    var h = 0x3c074a61
    var i = from
    while (i < until) { h = h * 31 + bytes(i); i += 1 }
    Math.floorMod(scala.util.hashing.MurmurHash3.finalizeHash(h, until - from), partitions)
  }

  /** RocksDB's default order of keys: bytewise, unsigned. */
  val EntryOrdering: Ordering[Array[Byte]] = new Ordering[Array[Byte]] {
    override def compare(a: Array[Byte], b: Array[Byte]): Int = java.util.Arrays.compareUnsigned(a, b)
  }

  /** What a key's entries start with (its length, then its bytes): their order is the prefixes' order. */
  def keyPrefix(key: Array[Byte], keyLength: Int): Array[Byte] =
    ByteBuffer.allocate(4 + keyLength).putInt(keyLength).put(key, 0, keyLength).array()

  private def startsWith(bytes: Array[Byte], prefix: Array[Byte]): Boolean = hasPrefix(bytes, prefix, 12)

  /** Whether `bytes` are `prefix` followed by `tail` bytes more. */
  private[eqdelete] def hasPrefix(bytes: Array[Byte], prefix: Array[Byte], tail: Int): Boolean =
    bytes.length == prefix.length + tail && java.util.Arrays.equals(bytes, 0, prefix.length, prefix, 0, prefix.length)
}
