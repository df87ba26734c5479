package eqdelete.resolve

import scala.collection.mutable
import scala.jdk.CollectionConverters._

import org.apache.spark.rdd.RDD
import org.apache.spark.sql.{Row, SparkSession}
import org.apache.spark.sql.types.{LongType, StringType, StructField, StructType}
import org.apache.spark.storage.StorageLevel

/**
 * The kept indexes of the live rows ([[KeptLiveIndex]]) of this driver, one per table and
 * equality set, and a resolve that finds its positions through them.
 */
object KeptLiveIndexes {
  private val kept = mutable.HashMap.empty[(String, Seq[Int]), KeptLiveIndex]

  private val Positions = StructType(Seq(StructField("_file", StringType, nullable = false), StructField("_pos", LongType, nullable = false)))

  /**
   * Resolves `tableName`'s equality deletes, finding the positions through the kept indexes
   * (each brought to the round's snapshot first); the same commit as
   * [[ResolveEqualityDeletes.run]]. `alsoToday`: today's plan's positions are found too, for the
   * differential test. Returns the result, and (today's, the index's) positions as `file#pos`.
   */
  def resolve(session: SparkSession, tableName: String, partitions: Int, alsoToday: Boolean): (ResolveEqualityDeletes.Result, Seq[String], Seq[String]) = synchronized {
    var today = Seq.empty[String]
    var found = Seq.empty[(KeptLiveIndex, RDD[IndexedDeletedPositions.Found])]
    val prepared = ResolveEqualityDeletes.prepareWith(session, tableName) { (work, deletes) =>
      if (alsoToday) {
        today = DeletedPositions.of(session, work, deletes).collect().map(r => s"${r.getString(0)}#${r.getLong(1)}").distinct.sorted.toSeq
      }
      found = deletes.deleteSets.map { set =>
        val index = kept.getOrElseUpdate((tableName, set.equalityIds), KeptLiveIndex.create(session, partitions))
        index -> index.positions(session, work, deletes, set).persist(StorageLevel.MEMORY_AND_DISK)
      }
      val rows = session.sparkContext.union(found.map(_._2.map(f => (f.path, f.position)))).distinct().map { case (f, p) => Row(f, p) }
      session.createDataFrame(rows, Positions)
    }
    try {
      val result = prepared.commit()
      result.snapshotId.foreach(s => found.foreach { case (index, rows) => index.committed(s, rows.map(_.entry)) })
      val indexed = found.flatMap(_._2.map(f => s"${f.path}#${f.position}").collect()).distinct.sorted
      (result, today, indexed)
    } finally found.foreach(_._2.unpersist())
  }

  /** For the differential test: a round through the kept indexes; (today's positions, the index's, rows resolved). */
  def roundBothWays(session: SparkSession, tableName: String): (java.util.List[String], java.util.List[String], Long) = {
    val (result, today, indexed) = resolve(session, tableName, partitions = 3, alsoToday = true)
    (today.asJava, indexed.asJava, result.rowsResolved)
  }

  /** Drops the kept indexes of `tableName`. */
  def forget(session: SparkSession, tableName: String): Unit = synchronized {
    kept.keys.filter(_._1 == tableName).toSeq.foreach(k => kept.remove(k).foreach(_.drop(session)))
  }
}
