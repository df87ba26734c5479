package org.apache.spark.sql.eqdelete.compat

import org.apache.spark.{Dependency, OneToOneDependency, Partition, SparkContext, TaskContext}
import org.apache.spark.rdd.RDD
import org.apache.spark.sql.catalyst.InternalRow

/**
 * The rows of a query that is planned when Spark first asks for this RDD's partitions (a job on
 * it starting), not when the RDD is made: a micro-batch source's `getBatch` must return a
 * DataFrame, and Spark also calls it on restart for a batch already committed, whose rows are
 * never read (and whose snapshots may be gone).
 */
final class DeferredQueryRDD(sc: SparkContext, @transient private val plan: () => RDD[InternalRow])
    extends RDD[InternalRow](sc, Nil) {

  @transient private lazy val lock = new Object
  // Set on the driver, before a task is serialized: executors read it, never `plan`.
  private var rows: RDD[InternalRow] = _

  private def planned: RDD[InternalRow] = lock.synchronized {
    if (rows == null) rows = plan()
    rows
  }

  override protected def getDependencies: Seq[Dependency[_]] = Seq(new OneToOneDependency(planned))

  override protected def getPartitions: Array[Partition] = planned.partitions

  override def compute(split: Partition, context: TaskContext): Iterator[InternalRow] = rows.iterator(split, context)
}
