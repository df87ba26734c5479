package eqdelete.changes

import scala.jdk.CollectionConverters._

import org.apache.iceberg.{DataFile, Snapshot, Table}

/**
 * The data files live at a snapshot, with the column stats of the given field ids (the key
 * columns a snapshot's equality deletes are paired with the files by, SnapshotChangeFiles):
 * Iceberg's plan of the snapshot, or, when the files of one of its last ancestors were the last
 * asked for of its table (a stream walking its table's commits), those less the files each commit
 * since removed and with those it added, from their own manifests alone. A snapshot's files are
 * exactly its parent's with its own added and removed, whatever its operation. The last snapshot's
 * files are kept for each table, the least recently asked dropped past a bound on the files kept
 * in all.
 */
private[changes] object LiveDataFiles {
  private val MostFilesKept = 200000
  /** How many commits' own manifests are read to bring the kept files forward, rather than planning the snapshot. */
  private val MostSnapshotsBetween = 100

  private final case class Kept(snapshotId: Long, statsOf: Set[Int], files: Vector[DataFile])

  private val last = new java.util.LinkedHashMap[String, Kept](16, 0.75f, true)
  private var filesKept = 0L

  def at(table: Table, snapshotId: Long, statsOf: Set[Int]): Vector[DataFile] = {
    val key = s"${table.uuid()}@${table.location()}"
    val snapshot = Option(table.snapshot(snapshotId)).getOrElse(throw new IllegalArgumentException(
      s"eqdelete: snapshot $snapshotId of ${table.name()} is not in its metadata (expired?)"))
    val kept = last.synchronized(Option(last.get(key))).filter(k => statsOf.subsetOf(k.statsOf))
    val found = kept.flatMap(k => since(table, k.snapshotId, snapshot).map { later =>
      val ids = k.statsOf.map(Integer.valueOf).asJava
      k.copy(snapshotId = snapshotId, files = later.foldLeft(k.files) { (files, s) =>
        val removed = s.removedDataFiles(table.io()).asScala.map(_.location()).toSet
        files.filterNot(f => removed(f.location())) ++ s.addedDataFiles(table.io()).asScala.map(_.copyWithStats(ids))
      })
    }).getOrElse {
      val ids = statsOf.map(Integer.valueOf).asJava
      Kept(snapshotId, statsOf, scala.util.Using.resource(table.newScan().useSnapshot(snapshotId).includeColumnStats().planFiles())(
        _.asScala.map(_.file().copyWithStats(ids)).toVector))
    }
    keep(key, found)
    found.files
  }

  /** The snapshots after `from` up to `to`, oldest first, when `from` is one of `to`'s last ancestors (or `to`: none). */
  private def since(table: Table, from: Long, to: Snapshot): Option[Seq[Snapshot]] = {
    val later = Iterator.iterate(Option(to))(_.flatMap(s => Option(s.parentId()).flatMap(id => Option(table.snapshot(id)))))
      .take(MostSnapshotsBetween + 1).takeWhile(_.exists(_.snapshotId() != from)).flatten.toVector
    val reached = later.lastOption.getOrElse(to)
    if (to.snapshotId() == from) Some(Nil)
    else if (later.size <= MostSnapshotsBetween && Option(reached.parentId()).exists(_.longValue == from)) Some(later.reverse)
    else None
  }

  private def keep(key: String, kept: Kept): Unit = last.synchronized {
    Option(last.remove(key)).foreach(old => filesKept -= old.files.size)
    if (kept.files.size <= MostFilesKept) {
      last.put(key, kept)
      filesKept += kept.files.size
    }
    val eldest = last.values().iterator()
    while (filesKept > MostFilesKept && eldest.hasNext) {
      filesKept -= eldest.next().files.size
      eldest.remove()
    }
  }
}
