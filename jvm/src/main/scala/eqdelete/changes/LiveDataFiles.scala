package eqdelete.changes

import java.util.concurrent.ConcurrentHashMap

import scala.jdk.CollectionConverters._

import org.apache.iceberg.{DataFile, Table}

/**
 * The data files live at a snapshot, with their column stats (what a snapshot's changes pair its
 * deletes with, SnapshotChangeFiles): Iceberg's plan of the snapshot, or, when the files of its
 * parent were the last asked for (a stream walking its table's commits one by one), those less
 * the files it removed and with those it added, from its own manifests alone. A snapshot's files
 * are exactly its parent's with its own added and removed, whatever its operation. The last
 * snapshot's files are kept per table, up to a bound on their number.
 */
private[changes] object LiveDataFiles {
  private val MostFilesKept = 200000

  private final case class Kept(snapshotId: Long, files: Vector[DataFile])

  private val last = new ConcurrentHashMap[String, Kept]()

  def at(table: Table, snapshotId: Long): Vector[DataFile] = {
    val key = s"${table.uuid()}@${table.location()}"
    val snapshot = table.snapshot(snapshotId)
    val kept = Option(last.get(key))
    val files = kept.filter(_.snapshotId == snapshotId).map(_.files).orElse(
      kept.filter(k => Option(snapshot.parentId()).exists(_.longValue == k.snapshotId)).map { parent =>
        val removed = snapshot.removedDataFiles(table.io()).asScala.map(_.location()).toSet
        parent.files.filterNot(f => removed(f.location())) ++ snapshot.addedDataFiles(table.io()).asScala
      }).getOrElse {
      scala.util.Using.resource(table.newScan().useSnapshot(snapshotId).includeColumnStats().planFiles())(
        _.asScala.map(_.file()).toVector)
    }
    if (files.size <= MostFilesKept) last.put(key, Kept(snapshotId, files)) else last.remove(key)
    files
  }
}
