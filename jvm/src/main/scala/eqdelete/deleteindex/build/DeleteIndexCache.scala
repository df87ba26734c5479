package eqdelete.deleteindex.build

import java.nio.charset.StandardCharsets

import scala.util.control.NonFatal

import eqdelete.cost.IndexKind
import eqdelete.deleteindex.DeleteKeyIndex
import eqdelete.read.DeleteFileReadException

import org.apache.iceberg.{DeleteFile, FileFormat}
import org.apache.iceberg.io.FileIO
import org.apache.spark.SparkContext
import org.apache.spark.broadcast.Broadcast
import org.apache.spark.sql.eqdelete.compat.EqDeleteConf
import org.apache.spark.sql.internal.SQLConf
import org.apache.spark.sql.types.DataType

/**
 * The filter strategy's broadcast delete indexes, kept across queries. Delete files are
 * immutable, so the same files with the same scopes and sequence numbers give the same index:
 * a dashboard re-running its queries reads each delete file once, not per query. A hit checks
 * every file is still there with its recorded size and format (see `verify`), so a lost or
 * overwritten delete file still fails the query.
 * Least recently used indexes are dropped beyond spark.eqdelete.filter.cacheMaxKeys keys.
 */
object DeleteIndexCache {

  private final case class Key(
      files: Seq[(String, Long, Int, Long)],
      equalityIds: Seq[Int],
      types: Seq[DataType],
      kind: IndexKind,
      coverers: Seq[(Key, Int)])
  private final case class Entry(context: SparkContext, built: BuiltIndex, keys: Long)

  private val entries = new java.util.LinkedHashMap[Key, Entry](16, 0.75f, true)
  private var cachedKeys = 0L
  // One build per key at a time: a set's own subquery and a set it covers may ask together.
  private val building = new java.util.concurrent.ConcurrentHashMap[Key, Object]()

  /**
   * An index, how many delete rows its coverings dropped while it was built, its size in memory
   * (Spark's `SizeEstimator`, measured once, when built), and whether it was kept from an earlier query.
   */
  final case class BuiltIndex(index: Broadcast[DeleteKeyIndex], coveredRows: Long, bytes: Long, kept: Boolean = false)

  /**
   * The index of `source`'s set, from the cache or built; `coverers` are the broadcast indexes of
   * the sets covering its rows (see `DeleteKeyIndexSource.coverers`), in the same order.
   */
  def getOrBuild(
      context: SparkContext,
      conf: SQLConf,
      source: DeleteKeyIndexSource,
      coverers: Seq[(Broadcast[DeleteKeyIndex], Int)] = Nil): BuiltIndex = {
    val key = keyOf(source)
    val lock = building.computeIfAbsent(key, _ => new Object)
    try lock.synchronized {
      cached(key, context) match {
        case Some(built) =>
          verifyAll(source.io, source.indexed.set.files.map(_.file))
          built.copy(kept = true)
        case None =>
          val built = DeleteIndexBuilder.build(context, source, coverers)
          store(key, Entry(context, built, built.index.value.distinctKeys.toLong), EqDeleteConf.filterCacheMaxKeys(conf))
          built
      }
    } finally building.remove(key, lock)
  }

  // The covering sets are part of the key: an index built without some covered rows is only
  // right beside those coverers. So is the kind: a key bitmap only serves scans whose data files
  // are all older than its deletes.
  private def keyOf(source: DeleteKeyIndexSource): Key = {
    val set = source.indexed.set
    Key(set.files.map(r => (r.file.location(), r.file.fileSizeInBytes(), r.scope, r.sequenceNumber)),
      set.equalityIds, source.indexed.keyTypes, source.indexed.kind, source.coverers.map { case (c, position) => (keyOf(c), position) })
  }

  private def cached(key: Key, context: SparkContext): Option[BuiltIndex] = synchronized {
    Option(entries.get(key)).flatMap { entry =>
      if (entry.context eq context) Some(entry.built) else { remove(key); None }
    }
  }

  private def store(key: Key, entry: Entry, maxKeys: Long): Unit = synchronized {
    if (entry.keys <= maxKeys && !entries.containsKey(key)) {
      entries.put(key, entry)
      cachedKeys += entry.keys
      // The entries' own values: a get() would count as an access of this access-ordered map,
      // move the entry, and fail the iterator's remove (ConcurrentModificationException).
      val eldest = entries.entrySet().iterator()
      while (cachedKeys > maxKeys && eldest.hasNext) {
        cachedKeys -= eldest.next().getValue.keys
        eldest.remove() // the broadcast itself is cleaned up by Spark once unreferenced
      }
    }
  }

  private def remove(key: Key): Unit = Option(entries.remove(key)).foreach(e => cachedKeys -= e.keys)

  /**
   * Files checked at once on a hit: each check is a stat and a 4-byte read, two requests on an
   * object store, so a set of thousands of delete files (a streaming table's) checked one by one
   * on the driver would wait for each request in turn.
   */
  private val VerifyThreads = 16

  /** `verify` of every file, up to `VerifyThreads` at a time; the first failure (in `files`' order) is thrown. */
  private def verifyAll(io: FileIO, files: Seq[DeleteFile]): Unit = {
    if (files.size <= 1) files.foreach(verify(io, _))
    else {
      val threads = new java.util.concurrent.atomic.AtomicInteger()
      val pool = java.util.concurrent.Executors.newFixedThreadPool(math.min(VerifyThreads, files.size), (task: Runnable) => {
        val thread = new Thread(task, s"eqdelete-verify-cached-delete-file-${threads.incrementAndGet()}")
        thread.setDaemon(true)
        thread
      })
      try {
        val checks = files.map(file => pool.submit(new Runnable { override def run(): Unit = verify(io, file) }))
        checks.foreach { check =>
          try check.get()
          catch { case e: java.util.concurrent.ExecutionException => throw e.getCause }
        }
      } finally pool.shutdownNow()
    }
  }

  /**
   * The file is where the metadata says, with the size it says, and still looks like its format
   * (the magic bytes Parquet, Avro and ORC files start or end with): else the query fails.
   * Beyond that the cache trusts that delete files are immutable, as Iceberg's spec says they
   * are; a file rewritten in place with the same size and magic bytes is not noticed.
   */
  private def verify(io: FileIO, file: DeleteFile): Unit = {
    def fail(problem: String) = throw new DeleteFileReadException(file.location(), new IllegalStateException(problem))
    try {
      val input = io.newInputFile(file.location())
      val length = input.getLength
      if (length != file.fileSizeInBytes()) fail(s"file has $length bytes, the table's metadata says ${file.fileSizeInBytes()}")
      val (offset, magic) = file.format() match {
        case FileFormat.PARQUET => (length - 4, "PAR1")
        case FileFormat.AVRO => (0L, "Obj\u0001")
        case FileFormat.ORC => (0L, "ORC")
        case _ => (0L, "")
      }
      if (magic.nonEmpty) {
        val found = new Array[Byte](magic.length)
        val stream = input.newStream()
        try {
          stream.seek(offset)
          var read = 0
          while (read < found.length) {
            val n = stream.read(found, read, found.length - read)
            if (n < 0) fail("file ends early")
            read += n
          }
        } finally stream.close()
        if (!java.util.Arrays.equals(found, magic.getBytes(StandardCharsets.ISO_8859_1))) {
          fail(s"not a ${file.format()} file any more (it was when its index was cached)")
        }
      }
    } catch {
      case e: DeleteFileReadException => throw e
      case NonFatal(e) => throw new DeleteFileReadException(file.location(), e)
    }
  }
}
