package eqdelete.rules

import eqdelete.planning.{DeleteFileReadException, DeleteKeyIndex, EqualityDeleteSet}

import org.apache.spark.SparkContext
import org.apache.spark.broadcast.Broadcast
import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.eqdelete.EqDeleteConf
import org.apache.spark.sql.internal.SQLConf
import org.apache.spark.sql.types.DataType

/**
 * The filter strategy's broadcast delete indexes, kept across queries. Delete files are
 * immutable, so the same files with the same scopes and sequence numbers give the same index:
 * a dashboard re-running its queries reads each delete file once, not per query. A hit checks
 * every file is still there with its recorded size, so a lost delete file still fails the query.
 * Least recently used indexes are dropped beyond spark.eqdelete.filter.cacheMaxKeys keys.
 */
object DeleteIndexCache {

  private final case class Key(files: Seq[(String, Long, Int, Long)], equalityIds: Seq[Int], types: Seq[DataType])
  private final case class Entry(context: SparkContext, index: Broadcast[DeleteKeyIndex], keys: Long)

  private val entries = new java.util.LinkedHashMap[Key, Entry](16, 0.75f, true)
  private var cachedKeys = 0L

  def getOrBuild(session: SparkSession, scan: DeletedRowsScan, set: EqualityDeleteSet): Broadcast[DeleteKeyIndex] = {
    val types = scan.keyColumns(set).map(_.dataType)
    val key = Key(set.files.map(r => (r.file.location(), r.file.fileSizeInBytes(), r.scope, r.sequenceNumber)),
      set.equalityIds, types)
    val context = session.sparkContext
    cached(key, context) match {
      case Some(index) =>
        set.files.foreach(ref => verify(scan, ref.file))
        index
      case None =>
        val index = DeleteKeyIndex.forKeyTypes(types)
        scan.deleteRows(session, set, set.files).collect().foreach { case (keys, scope, seq) => index.add(scope, keys, seq) }
        val broadcast = context.broadcast[DeleteKeyIndex](index.seal())
        store(key, Entry(context, broadcast, index.distinctKeys.toLong), EqDeleteConf.filterCacheMaxKeys(SQLConf.get))
        broadcast
    }
  }

  private def cached(key: Key, context: SparkContext): Option[Broadcast[DeleteKeyIndex]] = synchronized {
    Option(entries.get(key)).flatMap { entry =>
      if (entry.context eq context) Some(entry.index) else { remove(key); None }
    }
  }

  private def store(key: Key, entry: Entry, maxKeys: Long): Unit = synchronized {
    if (entry.keys <= maxKeys && !entries.containsKey(key)) {
      entries.put(key, entry)
      cachedKeys += entry.keys
      val eldest = entries.keySet().iterator()
      while (cachedKeys > maxKeys && eldest.hasNext) {
        val victim = eldest.next()
        cachedKeys -= entries.get(victim).keys
        eldest.remove() // the broadcast itself is cleaned up by Spark once unreferenced
      }
    }
  }

  private def remove(key: Key): Unit = Option(entries.remove(key)).foreach(e => cachedKeys -= e.keys)

  /** The file is where the metadata says, with the size it says: else the query fails. */
  private def verify(scan: DeletedRowsScan, file: org.apache.iceberg.DeleteFile): Unit = {
    val length = try scan.table.io().newInputFile(file.location()).getLength catch {
      case e: Exception => throw new DeleteFileReadException(file.location(), e)
    }
    if (length != file.fileSizeInBytes()) {
      throw new DeleteFileReadException(file.location(),
        new IllegalStateException(s"file has $length bytes, the table's metadata says ${file.fileSizeInBytes()}"))
    }
  }
}
