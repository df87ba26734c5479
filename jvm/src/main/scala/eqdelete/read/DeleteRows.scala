package eqdelete.read

import eqdelete.planning.EqualityDeleteRef

import org.apache.spark.SparkContext
import org.apache.spark.rdd.RDD

/** The delete rows of some equality delete files, read by Spark tasks. */
object DeleteRows {
  /**
   * (key values, scope, delete sequence number) of every delete row of `files`, read by `tasks`
   * Spark tasks (the cost model sizes them). Lazy: nothing is read until a job runs it.
   */
  def rdd(
      context: SparkContext,
      reader: DeleteRowReader,
      files: Seq[EqualityDeleteRef],
      tasks: Int,
      keys: String): RDD[(Array[Any], Long, Long)] = {
    val described = files.map(ref => (ref.file, ref.scope.toLong, ref.sequenceNumber))
    context.parallelize(described, math.max(1, tasks)).mapPartitions { refs =>
      refs.flatMap { case (file, scope, seq) => reader.read(file).map(values => (values, scope, seq)) }
    }.setName(s"eqdelete delete rows of ${files.size} file(s) on $keys")
  }
}
