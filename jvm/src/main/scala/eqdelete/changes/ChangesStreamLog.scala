package eqdelete.changes

import java.nio.charset.StandardCharsets

import scala.jdk.CollectionConverters._

import com.fasterxml.jackson.databind.ObjectMapper
import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.{FileSystem, Path}

/**
 * What a stream of changes keeps in its checkpoint's source folder, beside Spark's offsets:
 *
 *  - where it started, the first time it is asked, as Spark's Kafka source keeps its starting
 *    offsets: a stream that starts at "latest" (or at the earliest readable snapshot) and restarts
 *    before its first batch commits starts from the same snapshot, not from a later one;
 *  - the files (units) of a snapshot it split between batches, when it first splits it: an offset
 *    counts the units read, and which files a snapshot touches is decided from metadata that can
 *    change between runs (a schema expired, another eqdelete), so a restart resumes the same list;
 *  - the stream's kept row images (with `spark.eqdelete.changes.rowImages`), unless
 *    `spark.eqdelete.state.location` puts them elsewhere: [[stateRoot]].
 */
final class ChangesStreamLog(metadataPath: String, hadoopConf: Configuration) {
  /** Where the stream's kept state is checkpointed by default. */
  val stateRoot: String = new Path(metadataPath, "eqdelete-state").toString

  private val startFile = new Path(metadataPath, "eqdelete-changes-start.json")
  private val mapper = new ObjectMapper()
  private def fs: FileSystem = startFile.getFileSystem(hadoopConf)

  /** The start kept, or `resolve()`'s, kept now. */
  def startOrKeep(resolve: => StreamPosition): StreamPosition =
    read(startFile).map(ChangesOffset.fromJson(_).position).getOrElse {
      val start = resolve
      keep(startFile, ChangesOffset(start).json())
      start
    }

  /** The units kept for a split snapshot (`full`: its whole rows), if it was split. */
  def splitUnits(snapshotId: Long, full: Boolean): Option[IndexedSeq[StreamUnit]] =
    read(unitsFile(snapshotId, full)).map { json =>
      mapper.readTree(json).get("units").elements().asScala.map(u =>
        StreamUnit(u.get("file").asText(), u.get("deletes").asBoolean())).toVector
    }

  /** Keeps the units of a snapshot split between batches, unless kept already. */
  def keepSplitUnits(snapshotId: Long, full: Boolean, units: IndexedSeq[StreamUnit]): Unit =
    if (!fs.exists(unitsFile(snapshotId, full))) {
      val node = mapper.createObjectNode()
      node.put("snapshot_id", snapshotId).put("full", full)
      val array = node.putArray("units")
      units.foreach(u => array.addObject().put("file", u.file).put("deletes", u.deletes))
      keep(unitsFile(snapshotId, full), mapper.writeValueAsString(node))
    }

  /** The snapshots whose units are kept. */
  def splitSnapshots(): Seq[Long] = {
    val dir = new Path(metadataPath)
    if (!fs.exists(dir)) Nil
    else fs.listStatus(dir).map(_.getPath.getName).toSeq.collect { case UnitsName(id) => id.toLong }.distinct
  }

  /** Forgets the units of split snapshots `ids`, which no batch reads again. */
  def forgetSplitUnits(ids: Set[Long]): Unit =
    for (id <- ids; full <- Seq(true, false)) {
      val file = unitsFile(id, full)
      if (fs.exists(file)) fs.delete(file, false)
    }

  private val UnitsPrefix = "eqdelete-changes-units-"
  private val UnitsName = s"$UnitsPrefix(-?\\d+)-(?:rows|changes)\\.json".r

  private def unitsFile(snapshotId: Long, full: Boolean): Path =
    new Path(metadataPath, s"$UnitsPrefix$snapshotId-${if (full) "rows" else "changes"}.json")

  private def read(file: Path): Option[String] =
    if (!fs.exists(file)) None
    else {
      val in = fs.open(file)
      try Some(new String(in.readAllBytes(), StandardCharsets.UTF_8)) finally in.close()
    }

  /** Written aside and renamed into place: a crash leaves no half-written file behind. */
  private def keep(file: Path, text: String): Unit = {
    val temp = new Path(metadataPath, s".${file.getName}-${java.util.UUID.randomUUID()}.tmp")
    fs.mkdirs(file.getParent)
    val out = fs.create(temp, false)
    try out.write(text.getBytes(StandardCharsets.UTF_8)) finally out.close()
    if (!fs.rename(temp, file)) {
      fs.delete(temp, false)
      if (!fs.exists(file)) throw new IllegalStateException(s"eqdelete-changes: could not keep $file")
    }
  }
}

/** One file a snapshot's changes read: one it may delete rows of (`deletes`), or one it added. */
final case class StreamUnit(file: String, deletes: Boolean)
