package eqdelete.state

import scala.reflect.ClassTag

import org.apache.spark.{Partition, TaskContext}
import org.apache.spark.rdd.RDD

/**
 * `prev`, partition for partition, whose task `i` prefers `homes(i)`: the executor that last held
 * store `i` of an index (none when not known yet). Only a preference: a task Spark runs
 * elsewhere (the executor is busy past the locality wait, or gone) loads its store there.
 */
final class AtStoreRDD[T: ClassTag](prev: RDD[T], homes: Array[String]) extends RDD[T](prev) {
  require(prev.partitions.length == homes.length, s"${prev.partitions.length} partitions for ${homes.length} stores")

  override protected def getPartitions: Array[Partition] = prev.partitions
  override def compute(split: Partition, context: TaskContext): Iterator[T] = prev.iterator(split, context)
  override protected def getPreferredLocations(split: Partition): Seq[String] = Option(homes(split.index)).toSeq
}
