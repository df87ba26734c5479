package eqdelete.read

import eqdelete.planning.EqualityDeleteRef

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
      keys: String): RDD[InternalRow] = {
    val described = files.map(ref => (ref.file, ref.scope.toLong, ref.sequenceNumber))
    context.parallelize(described, math.max(1, tasks)).mapPartitions { refs =>
      val scopeAndSeq = new SpecificInternalRow(Seq(LongType, LongType))
      val joined = new JoinedRow()
      refs.flatMap { case (file, scope, seq) =>
        reader.read(file).map { keyValues =>
          scopeAndSeq.setLong(0, scope)
          scopeAndSeq.setLong(1, seq)
          joined(keyValues, scopeAndSeq): InternalRow
        }
      }
    }.setName(s"eqdelete delete rows of ${files.size} file(s) on $keys")
  }
}
