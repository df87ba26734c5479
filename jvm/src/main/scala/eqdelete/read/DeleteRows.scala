package eqdelete.read

import scala.reflect.ClassTag

import eqdelete.planning.EqualityDeleteRef

import org.apache.iceberg.DeleteFile

import org.apache.spark.SparkContext
import org.apache.spark.rdd.RDD
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{JoinedRow, SpecificInternalRow}
import org.apache.spark.sql.types.LongType

/** The delete rows of some equality delete files, read by Spark tasks. */
object DeleteRows {
  /**
   * Every delete row of `files` as (key values..., scope, delete sequence number), read by
   * `tasks` Spark tasks (the cost model sizes them) and streamed: each row is reused for the
   * next, so a consumer keeping one copies it (Spark's scan of an RDD projects each row it
   * passes on). Lazy: nothing is read until a job runs it.
   */
  def rdd(
      context: SparkContext,
      reader: DeleteRowReader,
      files: Seq[EqualityDeleteRef],
      tasks: Int,
      keys: String): RDD[InternalRow] =
    perTask(context, files, tasks, keys) { refs =>
      val scopeAndSeq = new SpecificInternalRow(Seq(LongType, LongType))
      val joined = new JoinedRow()
      refs.flatMap { file =>
        reader.read(file.file).map { keyValues =>
          scopeAndSeq.setLong(0, file.scope)
          scopeAndSeq.setLong(1, file.sequenceNumber)
          joined(keyValues, scopeAndSeq): InternalRow
        }
      }
    }

  /**
   * `files` split among `tasks` Spark tasks, each task's files handed to `read` (which reads
   * them with the task's own reader): for a reader of its own shape, as the filter's index
   * reads a single primitive key column by column. Lazy, as `rdd`.
   */
  def perTask[T: ClassTag](context: SparkContext, files: Seq[EqualityDeleteRef], tasks: Int, keys: String)(
      read: Iterator[TaskFile] => Iterator[T]): RDD[T] = {
    val described = files.map(ref => TaskFile(ref.file, ref.scope.toLong, ref.sequenceNumber))
    context.parallelize(described, math.max(1, tasks)).mapPartitions(read)
      .setName(s"eqdelete delete rows of ${files.size} file(s) on $keys")
  }

  /** A delete file as a task reads it: every row of it has this scope and sequence number. */
  final case class TaskFile(file: DeleteFile, scope: Long, sequenceNumber: Long)
}
