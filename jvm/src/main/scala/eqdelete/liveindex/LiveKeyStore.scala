package eqdelete.liveindex

import java.io.File
import java.nio.ByteBuffer
import java.nio.file.Files

import org.rocksdb.{CompressionType, EnvOptions, IngestExternalFileOptions, Options, RocksDB, RocksIterator, SstFileWriter,
  WriteBatch, WriteOptions}

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
 * Writes are batched and skip RocksDB's write-ahead log: a store is a cache of the table, rebuilt
 * from it when lost, never recovered from its own log.
 */
final class LiveKeyStore private (val directory: File) extends AutoCloseable {
  import LiveKeyStore._

  private val options = storeOptions()
  private val db = RocksDB.open(options, directory.getAbsolutePath)
  private val unlogged = new WriteOptions().setDisableWAL(true)
  private val batch = new WriteBatch()
  private var pending = 0

  /** Adds an entry (visible to lookups once [[flush]]ed). */
  def add(key: Array[Byte], keyLength: Int, file: Int, position: Long): Unit = {
    batch.put(entry(key, keyLength, file, position), Empty)
    written()
  }

  /** Removes an entry (from lookups once [[flush]]ed); removing one that is absent is no error. */
  def remove(key: Array[Byte], keyLength: Int, file: Int, position: Long): Unit = {
    batch.delete(entry(key, keyLength, file, position))
    written()
  }

  /** Writes the pending adds and removes. */
  def flush(): Unit = if (pending > 0) {
    db.write(unlogged, batch)
    batch.clear()
    pending = 0
  }

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
  def cursor(): Cursor = new Cursor(db.newIterator())

  /**
   * Adds entries given in RocksDB's order (bytewise, unsigned: [[EntryOrdering]]), as one sorted
   * file RocksDB takes in whole, past its memtables and compactions: how a store is loaded
   * from a table's rows once Spark has sorted them.
   */
  def ingestSorted(entries: Iterator[Array[Byte]]): Long = {
    flush()
    ingest(db, options, directory, entries.map(e => (e, Empty)))
  }

  /**
   * Removes every entry whose file id `gone` holds (files no longer in use, or read again under
   * a new id): one pass over the store, then a compaction so their bytes leave the disk. How many.
   */
  def purge(gone: Int => Boolean): Long = {
    flush()
    val it = db.newIterator()
    var n = 0L
    try {
      it.seekToFirst()
      while (it.isValid) {
        val k = it.key()
        if (gone(ByteBuffer.wrap(k, k.length - 12, 4).getInt)) { batch.delete(k); written(); n += 1 }
        it.next()
      }
    } finally it.close()
    if (n > 0) compact()
    n
  }

  /** Bytes the store holds on disk (its sorted files) and in its memtables. */
  def bytes: Long =
    db.getLongProperty("rocksdb.total-sst-files-size") + db.getLongProperty("rocksdb.cur-size-all-mem-tables")

  /** Merges the store's sorted files into one level, as a store rebuilt after its load is measured. */
  def compact(): Unit = { flush(); db.compactRange() }

  private def written(): Unit = {
    pending += 1
    if (pending >= BatchEntries) flush()
  }

  /** Closes the store and deletes its files. */
  override def close(): Unit = {
    batch.close(); unlogged.close(); db.close(); options.close()
    deleteRecursively(directory)
  }
}

object LiveKeyStore {
  RocksDB.loadLibrary()

  /** Lookups through one iterator ([[LiveKeyStore.cursor]]), by a key's [[keyPrefix]]. */
  final class Cursor private[LiveKeyStore] (it: RocksIterator) extends AutoCloseable {
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
    }

    override def close(): Unit = it.close()
  }

  /** The options of a store's RocksDB: LZ4, and memtables bounded (two of 64 MB). */
  private[liveindex] def storeOptions(): Options = new Options()
    .setCreateIfMissing(true)
    .setCompressionType(CompressionType.LZ4_COMPRESSION)
    .setWriteBufferSize(WriteBufferBytes)
    .setMaxWriteBufferNumber(2)

  /**
   * Adds `entries` (key and value) given in RocksDB's order ([[EntryOrdering]]) to `db` as one
   * sorted file RocksDB takes in whole, past its memtables and compactions. How many.
   */
  private[liveindex] def ingest(db: RocksDB, options: Options, directory: File, entries: Iterator[(Array[Byte], Array[Byte])]): Long = {
    val file = new File(directory, s"ingest-${System.nanoTime()}.sst")
    val envOptions = new EnvOptions()
    val writer = new SstFileWriter(envOptions, options)
    var n = 0L
    try {
      writer.open(file.getAbsolutePath)
      entries.foreach { case (k, v) => writer.put(k, v); n += 1 }
      if (n > 0) writer.finish()
    } finally { writer.close(); envOptions.close() }
    if (n > 0) {
      val moving = new IngestExternalFileOptions().setMoveFiles(true)
      try db.ingestExternalFile(java.util.Collections.singletonList(file.getAbsolutePath), moving) finally moving.close()
    }
    n
  }

  private val Empty = new Array[Byte](0)
  private val BatchEntries = 10000
  private val WriteBufferBytes = 64L << 20

  /** A new, empty store in a fresh directory under `parent`. */
  def create(parent: File, name: String): LiveKeyStore = {
    parent.mkdirs()
    new LiveKeyStore(Files.createTempDirectory(parent.toPath, name).toFile)
  }

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
  private[liveindex] def hasPrefix(bytes: Array[Byte], prefix: Array[Byte], tail: Int): Boolean =
    bytes.length == prefix.length + tail && java.util.Arrays.equals(bytes, 0, prefix.length, prefix, 0, prefix.length)

  private[liveindex] def deleteRecursively(file: File): Unit = {
    Option(file.listFiles()).foreach(_.foreach(deleteRecursively))
    file.delete()
  }
}
