package eqdelete.state

import java.io.File
import java.nio.channels.FileChannel
import java.nio.file.{Files, NoSuchFileException, Paths, StandardOpenOption}

import scala.jdk.CollectionConverters._

import org.rocksdb.{Checkpoint, CompressionType, EnvOptions, FlushOptions, IngestExternalFileOptions, Options, RocksDB,
  RocksDBException, RocksIterator, SstFileWriter, WriteBatch, WriteOptions}

/**
 * A RocksDB on the local disk of the executor holding it, the one shape of every kept store
 * (RocksDB's JNI library ships with every Spark line, for its streaming state store, so this is
 * no extra dependency). Writes are batched and skip RocksDB's write-ahead log: what makes a
 * store durable is the checkpoint of each version on durable storage ([[HeldStores]]), as
 * Spark's RocksDB state store does it: every change a step makes goes through [[put]], [[delete]]
 * or [[operation]], which the step's [[DeltaLog]] records; a change made otherwise (a bulk
 * [[ingest]]) makes the step end with a snapshot instead.
 */
abstract class RocksStore(val directory: File) extends AutoCloseable {
  protected val options: Options = RocksStore.storeOptions()
  protected val db: RocksDB = RocksDB.open(options, directory.getAbsolutePath)
  private val unlogged = new WriteOptions().setDisableWAL(true)
  private val batch = new WriteBatch()
  private var pending = 0
  @volatile private var recording: Option[DeltaLog.Writer] = None
  @volatile private var unrecorded = false

  protected final def put(key: Array[Byte], value: Array[Byte]): Unit = {
    batch.put(key, value)
    recording.foreach(_.put(key, value))
    written()
  }

  protected final def delete(key: Array[Byte]): Unit = {
    batch.delete(key)
    recording.foreach(_.delete(key))
    written()
  }

  /** A delete that an [[operation]] recorded already (its replay makes it again). */
  protected final def deleteUnrecorded(key: Array[Byte]): Unit = { batch.delete(key); written() }

  /** Records an operation of the store's own (`code`, `payload`), which [[replayOperation]] repeats on a load. */
  protected final def operation(code: Int, payload: Array[Byte]): Unit = recording.foreach(_.operation(code, payload))

  /** Repeats an operation [[operation]] recorded, on a store loaded at the version before it. */
  protected def replayOperation(code: Int, payload: Array[Byte]): Unit

  /** What the store keeps outside RocksDB, saved with a snapshot and given back by [[restore]]. */
  def properties: Map[String, String] = Map.empty
  def restore(properties: Map[String, String]): Unit = ()

  /** Writes the pending puts and deletes. */
  final def flush(): Unit = if (pending > 0) {
    db.write(unlogged, batch)
    batch.clear()
    pending = 0
  }

  /** Drops what was not written yet (a failed apply: the store is then dropped or applied again). */
  protected final def discardPending(): Unit = { batch.clear(); pending = 0 }

  private def written(): Unit = {
    pending += 1
    if (pending >= RocksStore.BatchEntries) flush()
  }

  /**
   * Adds `entries` (key and value) given in RocksDB's order as sorted files RocksDB takes in
   * whole, past its memtables and compactions. How many. Each file holds at most
   * [[RocksStore.IngestFileBytes]]: RocksDB's own file size, so a later compaction rewrites the few
   * files its keys overlap, not one file of the whole store (which a snapshot would then upload
   * again whole). Not recorded in a delta: a step that ingests ends with a snapshot.
   */
  protected final def ingest(entries: Iterator[(Array[Byte], Array[Byte])]): Long = {
    flush()
    unrecorded = true
    val envOptions = new EnvOptions()
    val files = scala.collection.mutable.ArrayBuffer.empty[String]
    var writer: SstFileWriter = null
    var (n, bytes) = (0L, 0L)
    def finished(): Unit = if (writer != null) { writer.finish(); writer.close(); writer = null }
    try {
      entries.foreach { case (k, v) =>
        if (writer == null || bytes >= RocksStore.IngestFileBytes) {
          finished()
          val file = new File(directory, s"ingest-${System.nanoTime()}-${files.size}.sst")
          writer = new SstFileWriter(envOptions, options)
          writer.open(file.getAbsolutePath)
          files += file.getAbsolutePath
          bytes = 0
        }
        writer.put(k, v)
        bytes += k.length + v.length
        n += 1
      }
      finished()
    } finally { if (writer != null) writer.close(); envOptions.close() }
    if (files.nonEmpty) {
      val moving = new IngestExternalFileOptions().setMoveFiles(true)
      try db.ingestExternalFile(java.util.Arrays.asList(files.toSeq: _*), moving) finally moving.close()
    }
    n
  }

  /** Bytes the store holds on disk (its sorted files) and in its memtables. */
  final def bytes: Long =
    db.getLongProperty("rocksdb.total-sst-files-size") + db.getLongProperty("rocksdb.cur-size-all-mem-tables")

  /**
   * Reads into the page cache each piece (8 MiB) of the store's sorted files that is not all there
   * already: a bulk load leaves them out of it (RocksDB's `SstFileWriter` drops the pages it writes,
   * so that a load pushes nothing else out), as may a reboot; a lookup in a cold store is then a
   * random read from the disk, which at 10^8 entries costs a round more than the lookups do
   * (PERFORMANCE.md). Whether a piece is cached is asked of the kernel (`mincore`, through
   * [[java.nio.MappedByteBuffer.isLoaded]]; the mapping is never touched), so that a store
   * linked or downloaded while its files were in the cache costs no copy of them. A file
   * compacted away meanwhile is passed over.
   */
  final def warm(): RocksStore.Warmed =
    RocksStore.warm(db.getLiveFilesMetaData.asScala.toSeq.map(f => Paths.get(f.path(), f.fileName())))

  /**
   * Fails unless `it` stopped at the end of the data: RocksDB makes an iterator invalid on a read
   * error (a block whose checksum does not match, a file cut short) exactly as at the end, so a
   * loop that stops at `!isValid` must ask, or a damaged block reads as "no entry" and a store
   * answers "no live row" where it cannot read. Call it when a loop over `it` ends.
   */
  protected final def ended(it: RocksIterator): Unit = RocksStore.ended(it, directory)

  /**
   * Reads every block of the store's sorted files and checks its checksum: a store loaded from
   * durable storage (downloaded, or linked to the very file a bad write may have changed) is used
   * only once it verified, as RocksDB checks a block only when a read reaches it. Its reads fill
   * the page cache, as warming would.
   */
  final def verify(): Unit =
    try db.verifyChecksum() catch {
      case e: RocksDBException => throw new KeptStateDamagedException(s"eqdelete: the kept store in $directory does not " +
        s"verify (${e.getMessage}); it is not used", e)
    }

  /** Merges the store's sorted files into one level. */
  final def compact(): Unit = { flush(); db.compactRange() }

  /** Runs `body` with every change recorded by `delta`; whether a change went unrecorded (a snapshot is owed). */
  private[state] final def recorded(delta: DeltaLog.Writer)(body: => Unit): Boolean = {
    recording = Some(delta)
    unrecorded = false
    try { body; flush() } finally recording = None
    unrecorded
  }

  /** Replays a delta recorded by [[recorded]]. */
  private[state] final def replay(delta: java.io.InputStream, what: String): Unit = {
    DeltaLog.replay(delta, what, new DeltaLog.Replay {
      override def put(key: Array[Byte], value: Array[Byte]): Unit = RocksStore.this.put(key, value)
      override def delete(key: Array[Byte]): Unit = RocksStore.this.delete(key)
      override def operation(code: Int, payload: Array[Byte]): Unit = { flush(); replayOperation(code, payload) }
    })
    flush()
  }

  /** A consistent copy of the store in `into` (which must not exist): hard links to its sorted files, and RocksDB's own. */
  private[state] final def checkpoint(into: File): Unit = {
    flush()
    val waiting = new FlushOptions().setWaitForFlush(true)
    try db.flush(waiting) finally waiting.close()
    val checkpoint = Checkpoint.create(db)
    try checkpoint.createCheckpoint(into.getAbsolutePath) finally checkpoint.close()
  }

  /** Closes the store and deletes its files. */
  override def close(): Unit = {
    batch.close(); unlogged.close(); db.close(); options.close()
    RocksStore.deleteRecursively(directory)
  }
}

object RocksStore extends org.apache.spark.internal.Logging {
  /** What [[RocksStore.warm]] did: the sorted files' bytes, and how many of them it read (the rest were cached). */
  final case class Warmed(bytes: Long, read: Long) {
    def plus(fileBytes: Long, fileRead: Long): Warmed = Warmed(bytes + fileBytes, read + fileRead)
  }

  /** Reads into the page cache the pieces of `files` not all there already ([[RocksStore#warm]]); a file gone is passed over. */
  private[eqdelete] def warm(files: Seq[java.nio.file.Path]): Warmed = {
    val buffer = java.nio.ByteBuffer.allocateDirect(WarmReadBytes)
    files.foldLeft(Warmed(0L, 0L)) { (sum, file) =>
      try {
        val channel = FileChannel.open(file, StandardOpenOption.READ)
        try {
          val size = channel.size()
          // The whole file asked first (one mapping of up to 1 GiB): a cached store maps each file once.
          val read = if (pieces(size, 1L << 30).forall { case (at, length) => cached(channel, at, length) }) 0L
            else pieces(size, WarmPieceBytes).map { case (at, length) =>
              if (cached(channel, at, length)) 0L else readPiece(channel, at, length, buffer)
            }.sum
          sum.plus(size, read)
        } finally channel.close()
      } catch {
        case _: NoSuchFileException => sum  // compacted away meanwhile
        case e: java.io.IOException =>
          // One file unreadable (truncated, its file system gone) is no reason to leave the others cold.
          logWarning(s"eqdelete: $file could not be read into the page cache: ${e.getMessage}")
          sum
      }
    }
  }

  /**
   * The piece warming asks about and reads as one: a file part evicted (the page cache's other
   * users push out a page here and there) costs this much of a read, not the whole file's. Each
   * piece is its own mapping until the collector unmaps it, so not much smaller.
   */
  private[eqdelete] val WarmPieceBytes = 8L << 20
  private val WarmReadBytes = 1 << 20

  /** A file of `size` bytes cut into pieces of `piece` bytes (the last one shorter): each one's offset and length. */
  private def pieces(size: Long, piece: Long): Seq[(Long, Long)] = (0L until size by piece).map(at => (at, math.min(piece, size - at)))

  /** Whether the file's `length` bytes from `at` are all in the page cache: asked through a mapping that is never touched. */
  private[eqdelete] def cached(channel: FileChannel, at: Long, length: Long): Boolean =
    channel.map(FileChannel.MapMode.READ_ONLY, at, length).isLoaded

  /** Reads the file's `length` bytes from `at` (or to its end) through `buffer`: the bytes read. */
  private def readPiece(channel: FileChannel, at: Long, length: Long, buffer: java.nio.ByteBuffer): Long = {
    var (read, n) = (0L, 0)
    while (read < length && { buffer.clear(); buffer.limit(math.min(buffer.capacity().toLong, length - read).toInt)
        n = channel.read(buffer, at + read); n > 0 }) read += n
    read
  }

  /** [[RocksStore#ended]], for a reader holding an iterator of the store in `directory`. */
  private[eqdelete] def ended(it: RocksIterator, directory: File): Unit =
    try it.status() catch {
      case e: RocksDBException => throw new KeptStateDamagedException(s"eqdelete: the kept store in $directory cannot be " +
        s"read (${Option(e.getStatus).map(_.getCodeString).getOrElse("error")}: ${e.getMessage}); it is not used", e)
    }

  RocksDB.loadLibrary()

  private val BatchEntries = 10000
  /** The most bytes (keys and values, before compression) of a file a bulk load ingests: RocksDB's own target file size. */
  private val IngestFileBytes = 64L << 20
  private val WriteBufferBytes = 64L << 20

  /** The options of a store's RocksDB: LZ4, and memtables bounded (two of 64 MB). */
  private def storeOptions(): Options = new Options()
    .setCreateIfMissing(true)
    .setCompressionType(CompressionType.LZ4_COMPRESSION)
    .setWriteBufferSize(WriteBufferBytes)
    .setMaxWriteBufferNumber(2)

  /** A fresh, empty directory for a store under `parent`. */
  def freshDirectory(parent: File, name: String): File = {
    parent.mkdirs()
    Files.createTempDirectory(parent.toPath, name).toFile
  }

  def deleteRecursively(file: File): Unit = {
    Option(file.listFiles()).foreach(_.foreach(deleteRecursively))
    file.delete()
  }
}
