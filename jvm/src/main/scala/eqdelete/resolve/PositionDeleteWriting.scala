package eqdelete.resolve

import scala.collection.mutable
import scala.util.Try
import scala.util.control.NonFatal

import eqdelete.write.TaskWrittenFiles

import org.apache.iceberg.{DeleteFile, StructLike, Table}
import org.apache.iceberg.io.FileIO
import org.apache.spark.internal.Logging
import org.apache.spark.sql.DataFrame
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.eqdelete.compat.{IcebergInternals, IcebergWriters, PartitionFiles}
import org.apache.spark.sql.functions.col

/** A data file the resolve may write deletes for: its spec, partition and position deletes (DVs included). */
final case class TargetFile(specId: Int, partition: StructLike, positionDeletes: Seq[DeleteFile])

/**
 * What one task wrote: delete files (position delete files, or one Puffin file's deletion
 * vectors), the delete files its deletion vectors replace, the data files referenced, and the
 * positions written.
 */
final case class WrittenDeletes(files: Seq[DeleteFile], replaced: Seq[DeleteFile], referenced: Seq[String], positions: Long)

object WrittenDeletes {
  /** Deletes the files `written` by `what` (a resolve, a compaction) whose commit is known not to have landed. */
  def discard(io: FileIO, written: Seq[WrittenDeletes], what: String): Unit =
    TaskWrittenFiles.delete(io, written.flatMap(_.files).map(_.location()), what)

  /**
   * `writes` run as one job, each task's result gathered as it finishes: when the job fails or
   * is cancelled (a round stopped), the files of the tasks that finished are deleted ([[TaskWrittenFiles]]).
   */
  def gathered(table: Table, writes: org.apache.spark.rdd.RDD[WrittenDeletes], what: String): Seq[WrittenDeletes] =
    TaskWrittenFiles.gathered(writes, table.io(), what)(_.files.map(_.location()))
}

/**
 * Writes the positions of deleted rows with Iceberg's own writers, in Spark tasks. The
 * positions are clustered by data file and sorted, so each data file's deletes are written by
 * one task (a data file may have one deletion vector) and position delete files come sorted
 * as the spec requires. Format v2: rolling position delete files, one set per partition a task
 * sees. Format v3: one deletion vector per data file, merged with the data file's existing
 * position deletes (its deletion vector, or older position delete files); the deletion vectors
 * and file-scoped delete files so merged are replaced.
 */
object PositionDeleteWriting {

  /** `tasks`: how many write tasks (a sink's batch: few), else spark.sql.shuffle.partitions. */
  def write(table: Table, formatVersion: Int, targets: Map[String, TargetFile], positions: DataFrame,
      tasks: Option[Int] = None): Seq[WrittenDeletes] = {
    val serializable = IcebergWriters.serializable(table)
    val shipped = positions.sparkSession.sparkContext.broadcast(targets)
    val clustered = tasks.fold(positions.repartition(col("_file")))(n => positions.repartition(n, col("_file")))
    val sorted = clustered.sortWithinPartitions("_file", "_pos")
    WrittenDeletes.gathered(table, sorted.queryExecution.toRdd.mapPartitions { rows =>
      val files = shipped.value
      Iterator(if (formatVersion >= 3) deletionVectors(serializable, files, rows) else positionDeleteFiles(serializable, files, rows))
    }, "a write of position deletes").filter(_.files.nonEmpty)
  }

  /** Each row once: several equality sets may delete the same row. */
  private def distinctPositions(rows: Iterator[InternalRow]): Iterator[(String, Long)] = {
    var lastPath: String = null
    var lastPos = -1L
    rows.flatMap { row =>
      val path = row.getUTF8String(0).toString
      val pos = row.getLong(1)
      if (pos == lastPos && path == lastPath) None
      else {
        lastPath = path
        lastPos = pos
        Some((path, pos))
      }
    }
  }

  private def target(targets: Map[String, TargetFile], path: String): TargetFile =
    targets.getOrElse(path, throw new IllegalStateException(s"eqdelete: data file $path was not part of the resolve's planning"))

  private def positionDeleteFiles(table: Table, targets: Map[String, TargetFile], rows: Iterator[InternalRow]): WrittenDeletes = {
    val task = new IcebergWriters.TaskWriters(table)
    val writers = mutable.LinkedHashMap.empty[(Int, String), PartitionFiles[(String, Long), DeleteFile]]
    val referenced = mutable.LinkedHashSet.empty[String]
    var positions = 0L
    val files = TaskWrittenFiles.deletingOnFailure[DeleteFile](table.io(), _.location())(
        () => { writers.values.foreach(_.close()); writers.values.toVector.flatMap(_.files) }) {
      distinctPositions(rows).foreach { case (path, pos) =>
        val file = target(targets, path)
        val spec = table.specs().get(file.specId)
        val writer = writers.getOrElseUpdate((file.specId, spec.partitionToPath(file.partition)),
          task.positionDeletes(spec, file.partition))
        writer.write((path, pos))
        referenced += path
        positions += 1
      }
    }
    WrittenDeletes(files, Nil, referenced.toVector, positions)
  }

  private def deletionVectors(table: Table, targets: Map[String, TargetFile], rows: Iterator[InternalRow]): WrittenDeletes = {
    lazy val writer = new IcebergWriters.TaskWriters(table).deletionVectors(path => target(targets, path).positionDeletes)
    val referenced = mutable.LinkedHashSet.empty[String]
    var positions = 0L
    var opened = false
    val files = TaskWrittenFiles.deletingOnFailure[DeleteFile](table.io(), _.location())(
        () => if (opened) { writer.close(); writer.files } else Nil) {
      distinctPositions(rows).foreach { case (path, pos) =>
        val file = target(targets, path)
        opened = true
        writer.delete(path, pos, table.specs().get(file.specId), file.partition)
        referenced += path
        positions += 1
      }
    }
    if (!opened) WrittenDeletes(Nil, Nil, Nil, 0L)
    else {
      // A partition-scoped position delete file may hold other data files' deletes: it stays.
      val replaced = writer.merged.filter(f => IcebergInternals.isDeletionVector(f) || IcebergInternals.isFileScoped(f))
      WrittenDeletes(files, replaced, referenced.toVector, positions)
    }
  }
}
