package eqdelete.liveindex

import scala.reflect.ClassTag

import org.apache.spark.{Partition, TaskContext}
import org.apache.spark.rdd.RDD

/**
 * `prev`, partition for partition, whose task `i` prefers `homes(i)`: the executor holding
 * store `i` of an index. A task that runs elsewhere all the same (the executor is gone, or
 * Spark's locality wait ran out) finds no store and fails as lost.
 */
final class AtStoreRDD[T: ClassTag](prev: RDD[T], homes: Array[String]) extends RDD[T](prev) {
  require(prev.partitions.length == homes.length, s"${prev.partitions.length} partitions for ${homes.length} stores")

  override protected def getPartitions: Array[Partition] = prev.partitions
  override def compute(split: Partition, context: TaskContext): Iterator[T] = prev.iterator(split, context)
  override protected def getPreferredLocations(split: Partition): Seq[String] = Seq(homes(split.index))
}
