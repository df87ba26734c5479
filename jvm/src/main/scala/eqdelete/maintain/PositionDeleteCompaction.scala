package eqdelete.maintain

import scala.jdk.CollectionConverters._
import scala.util.control.NonFatal

import eqdelete.resolve.WrittenDeletes
import eqdelete.write.TaskWrittenFiles

import org.apache.iceberg.{ContentFile, DeleteFile, StructLike, Table}
import org.apache.spark.{Partitioner, TaskContext}
import org.apache.spark.internal.Logging
import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.eqdelete.compat.{IcebergInternals, IcebergWriters}

/**
 * The compaction of a format v2 table's position delete files that rewrites only what changed.
 * In each partition where a reader of some data file opens `threshold` files or more
 * ([[PositionDeletePileUp]]): the partition-wide files (each resolve writes one per partition it
 * touches) are split into a file per data file, each merged with as few of that data file's own
 * files as [[ScopedDeleteTiers]] picks; a data file no new position names keeps its files, and
 * the files of data files gone are dropped. So a compaction costs what was deleted since the
 * last one (and a row's rewrites over the table's life are logarithmic), where Iceberg's
 * rewrite_position_delete_files rewrites every position delete file of the partition each time.
 * The layout it leaves is Iceberg's: position delete files scoped to one data file, which
 * `rewrite_data_files`' delete-ratio-threshold counts.
 *
 * Iceberg's rules hold: a partition-wide file applies to the data files of its own spec and
 * partition whose data sequence number is at most its own, a file-scoped one to its data file
 * under the same condition; a file that applies to no live data file is dropped. Each file
 * written carries its data file's data sequence number, so it applies to that file only. One
 * `RewriteFiles` commit: it fails if a concurrent commit removed a file it replaces (Iceberg
 * checks the files to delete are still live; with no data file replaced there is nothing else to
 * validate), and other writers' new delete files stay. A partition holding a delete file of a
 * format eqdelete does not read (ORC) is left as it is.
 */
object PositionDeleteCompaction extends Logging {

  /** What a compaction did: the position delete files it removed and those it added. */
  final case class Rewritten(rewritten: Int, added: Int)

  /**
   * A live data file of a partition being compacted: where its deletes go, its data sequence
   * number, and its own (file-scoped) position delete files that apply to it.
   */
  final case class Target(specId: Int, partitionPath: String, partition: StructLike, dataSequenceNumber: Long,
      scoped: IndexedSeq[DeleteFile])

  /**
   * What a compaction of `snapshotId` rewrites, from metadata: the partition-wide files of the
   * partitions due, the file-scoped files of data files gone, the data files of those partitions,
   * and those among them holding more files than `keepAtMost` with or without new positions.
   */
  final case class Plan(snapshotId: Long, keepAtMost: Int, wide: Seq[DeleteFile], dangling: Seq[DeleteFile],
      targets: Map[String, Target], overfull: Seq[String]) {
    def isEmpty: Boolean = wide.isEmpty && dangling.isEmpty && overfull.isEmpty
  }

  /** A file's data sequence number (as a manifest entry gives it: inherited; 0 for files written before v2). */
  private def sequenceOf(file: ContentFile[_]): Long = Option(file.dataSequenceNumber()).map(_.longValue()).getOrElse(0L)

  /** How many files a data file keeps after a compaction triggered at `threshold`: half, so the next is some rounds away. */
  def keepAtMost(threshold: Long): Int = math.max(1L, math.min(threshold / 2, Int.MaxValue)).toInt

  def plan(table: Table, snapshotId: Long, threshold: Long): Option[Plan] = {
    val snapshot = table.snapshot(snapshotId)
    if (snapshot == null || threshold <= 0) return None
    val due = PositionDeletePileUp.byPartition(table, snapshotId).filter { case (key, files) =>
      val readable = files.forall(IcebergInternals.readsRows)
      if (!readable) logWarning(s"eqdelete: ${table.name()}: partition $key holds position delete files eqdelete does not read; not compacted")
      readable && PositionDeletePileUp.filesPerDataFile(files) >= threshold
    }
    if (due.isEmpty) return None
    val keep = keepAtMost(threshold)
    val (scoped, wide) = due.values.flatten.toVector.partition(f => IcebergInternals.referencedDataFile(f).isDefined)
    val scopedByPath = scoped.groupBy(f => IcebergInternals.referencedDataFile(f).get)
    // Streamed: only the due partitions' data files are kept, and whether the others' own files still have one.
    val targets = Map.newBuilder[String, Target]
    val liveSequence = scala.collection.mutable.Map.empty[String, Long]
    snapshot.dataManifests(table.io()).asScala.foreach { manifest =>
      IcebergInternals.foreachLiveDataFile(manifest, table) { f =>
        val path = f.location()
        val (specId, partitionPath) = PositionDeletePileUp.partitionOf(table, f)
        val sequence = sequenceOf(f)
        if (scopedByPath.contains(path)) liveSequence(path) = sequence
        if (due.contains((specId, partitionPath))) {
          val own = scopedByPath.getOrElse(path, Vector.empty).filter(sequenceOf(_) >= sequence)
          targets += path -> Target(specId, partitionPath, f.copyWithoutStats().partition(), sequence, own.toIndexedSeq)
        }
      }
    }
    val byPath = targets.result()
    // A file-scoped file applies by path, whatever its partition: it is dangling when its data file is gone or newer.
    val dangling = scopedByPath.toVector.flatMap { case (path, files) =>
      files.filter(f => liveSequence.get(path).forall(_ > sequenceOf(f)))
    }
    val overfull = byPath.collect { case (path, t) if t.scoped.size > keep => path }.toVector
    Some(Plan(snapshotId, keep, wide, dangling, byPath, overfull)).filterNot(_.isEmpty)
  }

  /**
   * A compaction's files written, not yet committed: [[commit]] them, or [[discard]] them if the
   * commit is known to have failed. Each file written is scoped to one data file, whose data
   * sequence number it carries.
   */
  final class Prepared(val plan: Plan, val written: Seq[WrittenDeletes], io: org.apache.iceberg.io.FileIO) {
    val added: Seq[DeleteFile] = written.flatMap(_.files)
    val removed: Seq[DeleteFile] =
      (plan.wide ++ plan.dangling ++ written.flatMap(_.replaced)).groupBy(_.location()).values.map(_.head).toVector

    /** One `RewriteFiles` through `table` (the guarded one), marked with `marker`, validated from the plan's snapshot. */
    def commit(table: Table, marker: (String, String)): Rewritten = {
      val rewrite = table.newRewrite().validateFromSnapshot(plan.snapshotId)
      removed.foreach(rewrite.deleteFile)
      added.foreach(file => rewrite.addFile(file, plan.targets(scopedTo(file)).dataSequenceNumber))
      rewrite.set(marker._1, marker._2).commit()
      Rewritten(removed.size, added.size)
    }

    private def scopedTo(file: DeleteFile): String = IcebergInternals.referencedDataFile(file).getOrElse(
      throw new IllegalStateException(s"eqdelete: the compaction wrote ${file.location()}, which is not scoped to one data file"))

    def discard(): Unit = WrittenDeletes.discard(io, written, "a compaction")
  }

  /** Plans the compaction of the table's current snapshot and writes its files, in Spark tasks; None when nothing is due. */
  def prepare(session: SparkSession, table: Table, threshold: Long): Option[Prepared] =
    Option(table.currentSnapshot()).flatMap(s => plan(table, s.snapshotId(), threshold)).map { plan =>
      new Prepared(plan, write(session, table, plan), table.io())
    }

  /** Sends each (data file, position) to the task of its data file, so the task writes that file's deletes whole. */
  private final class ByDataFile(partitions: Int) extends Partitioner {
    def numPartitions: Int = partitions
    def getPartition(key: Any): Int = Math.floorMod(key.asInstanceOf[(String, Long)]._1.hashCode, partitions)
  }

  /** A row standing for a data file with too many files of its own and perhaps no new position: not a position. */
  private val Overfull = -1L

  private def write(session: SparkSession, table: Table, plan: Plan): Seq[WrittenDeletes] = {
    val sc = session.sparkContext
    val shipped = sc.broadcast((IcebergWriters.serializable(table), plan.targets))
    try {
      val slices = math.max(1, math.min(plan.wide.size, sc.defaultParallelism * 2))
      val positions = sc.parallelize(plan.wide, slices).mapPartitions { files =>
        val (t, targets) = shipped.value
        files.flatMap { file =>
          // Iceberg's delete index: a partition-wide file applies to the data files of its own spec
          // and partition that are not newer than it.
          val (specId, partitionPath) = PositionDeletePileUp.partitionOf(t, file)
          val sequence = sequenceOf(file)
          closingRows(t, file).filter { case (path, _) =>
            targets.get(path).exists(d => d.specId == specId && d.partitionPath == partitionPath && d.dataSequenceNumber <= sequence)
          }
        }
      }
      val overfull = sc.parallelize(plan.overfull.map(path => (path, Overfull)), 1)
      val keep = plan.keepAtMost
      WrittenDeletes.gathered(table, (positions ++ overfull).map(row => (row, ()))
        .repartitionAndSortWithinPartitions(new ByDataFile(math.max(1, sc.defaultParallelism)))
        .mapPartitions { rows =>
          val (t, targets) = shipped.value
          Iterator(writeScoped(t, targets, keep, rows.map(_._1).buffered))
        }, "a compaction of position deletes").filter(w => w.files.nonEmpty || w.replaced.nonEmpty)
    } finally shipped.destroy()
  }

  /** A position delete file's rows, its reader closed once they are read (or when the task ends, if it ends first). */
  private def closingRows(table: Table, file: DeleteFile): Iterator[(String, Long)] = {
    val rows = IcebergInternals.positionDeleteRows(table.io(), file).iterator()
    TaskContext.get().addTaskCompletionListener[Unit](_ => rows.close())
    new Iterator[(String, Long)] {
      private var open = true
      def hasNext: Boolean = open && (rows.hasNext || { rows.close(); open = false; false })
      def next(): (String, Long) = rows.next()
    }
  }

  /** Writes, for each data file in `rows` (sorted by data file and position), its new positions merged with the files the tiers pick. */
  private def writeScoped(table: Table, targets: Map[String, Target], keepAtMost: Int,
      rows: scala.collection.BufferedIterator[(String, Long)]): WrittenDeletes = {
    val writers = new IcebergWriters.TaskWriters(table)
    val files = scala.collection.mutable.ArrayBuffer.empty[DeleteFile]
    val replaced = Vector.newBuilder[DeleteFile]
    val referenced = Vector.newBuilder[String]
    var positions = 0L
    // Nothing references a failed or killed task's files: they go with it.
    val written = TaskWrittenFiles.deletingOnFailure[DeleteFile](table.io(), _.location())(() => files.toVector) {
      while (rows.hasNext) {
        val path = rows.head._1
        val fresh = Array.newBuilder[Long]
        var last = Overfull
        while (rows.hasNext && rows.head._1 == path) {
          val position = rows.next()._2
          if (position != Overfull && position != last) fresh += position  // several files may delete one row
          last = position
        }
        val target = targets(path)
        val newPositions = fresh.result()
        val merged = ScopedDeleteTiers.toMerge(target.scoped.map(_.recordCount()), newPositions.length, keepAtMost).map(target.scoped)
        if (newPositions.nonEmpty || merged.nonEmpty) {
          val old = if (merged.isEmpty) Array.emptyLongArray else IcebergInternals.deletedPositions(table.io(), merged, path)
          val all = mergeDistinct(newPositions, old)
          val writer = writers.positionDeletes(table.specs().get(target.specId), target.partition)
          // Its files counted even when a write fails: they are deleted with the task's others.
          try all.foreach(position => writer.write((path, position))) finally { writer.close(); files ++= writer.files }
          replaced ++= merged
          referenced += path
          positions += all.length
        }
      }
    }
    WrittenDeletes(written, replaced.result(), referenced.result(), positions)
  }

  /** The union of two ascending arrays, ascending, each value once. */
  private[maintain] def mergeDistinct(a: Array[Long], b: Array[Long]): Array[Long] = {
    val out = Array.newBuilder[Long]
    out.sizeHint(a.length + b.length)
    var i = 0
    var j = 0
    var last = Long.MinValue
    var any = false
    while (i < a.length || j < b.length) {
      val next = if (j >= b.length || (i < a.length && a(i) <= b(j))) { i += 1; a(i - 1) } else { j += 1; b(j - 1) }
      if (!any || next != last) out += next
      any = true
      last = next
    }
    out.result()
  }
}
