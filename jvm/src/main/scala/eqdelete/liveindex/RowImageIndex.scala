package eqdelete.liveindex

import scala.reflect.ClassTag

import org.apache.spark.{SparkContext, TaskContext}
import org.apache.spark.rdd.RDD

/**
 * A table's row images by key, held by the executors: one [[RowImageStore]] per partition of the
 * key's hash, each on the executor that created it, whose tasks later jobs prefer
 * ([[AtStoreRDD]]), as the live-row index's are ([[LiveKeyIndex]]). The driver holds only its id
 * and where its stores are; loads, changes and lookups are Spark jobs routing rows to their key's
 * store, sorted there so a task's seeks move forward.
 */
final class RowImageIndex private (val id: String, val partitions: Int, homes: Array[String]) {
  /** `rows` (starting with a key's prefix), each at its key's store, sorted there. */
  private def atStores[V: ClassTag](rows: RDD[(Array[Byte], V)]): RDD[(Array[Byte], V)] = {
    implicit val order: Ordering[Array[Byte]] = LiveKeyStore.EntryOrdering
    new AtStoreRDD(rows.repartitionAndSortWithinPartitions(LiveKeyIndex.byEntryKey(partitions)), homes)
  }

  /** Loads entries ([[RowImageStore.entry]] and value) into empty stores; how many. */
  def load(entries: RDD[(Array[Byte], Array[Byte])]): Long = {
    val index = id
    atStores(entries).mapPartitionsWithIndex((p, rows) => Iterator(RowImageStores.get(index, p).ingestSorted(rows)))
      .sum().toLong
  }

  /** Applies changes ([[RowImageStore.deleteChange]], [[RowImageStore.insertChange]] with the row): (inserted, removed). */
  def apply(changes: RDD[(Array[Byte], Array[Byte])]): (Long, Long) = {
    val index = id
    atStores(changes).mapPartitionsWithIndex((p, rows) => Iterator(RowImageStores.get(index, p).apply(rows)))
      .fold((0L, 0L)) { case ((i1, r1), (i2, r2)) => (i1 + i2, r1 + r2) }
  }

  /**
   * The rows of each key live at its version, with the key's tag: lazily, as an RDD whose tasks
   * run at the stores. `keys` are keys' prefixes ([[LiveKeyStore.keyPrefix]]) with a version and a
   * tag; a key given twice with one version and tag (a delete file naming a key twice) finds its
   * rows once.
   */
  def lookup(keys: RDD[(Array[Byte], (Long, Int))]): RDD[(Int, Array[Byte])] = {
    val index = id
    atStores(keys).mapPartitionsWithIndex { (p, rows) =>
      val cursor = RowImageStores.get(index, p).cursor()
      TaskContext.get().addTaskCompletionListener[Unit](_ => cursor.close())
      // A key's lookups lie together (sorted by key): only the current key's are remembered.
      var key: Array[Byte] = null
      val ofKey = scala.collection.mutable.HashSet.empty[(Long, Int)]
      rows.filter { case (prefix, payload) =>
        if (key == null || !java.util.Arrays.equals(key, prefix)) { key = prefix; ofKey.clear() }
        ofKey.add(payload)
      }.flatMap { case (prefix, (version, tag)) =>
        val found = Vector.newBuilder[(Int, Array[Byte])]
        cursor.rowsAt(prefix, version)(row => found += ((tag, row)))
        found.result()
      }
    }
  }

  /** Removes the entries removed at or before `version`, at each store; how many. */
  def purge(sc: SparkContext, version: Long): Long = {
    val index = id
    atEachStore(sc).map(p => RowImageStores.get(index, p).purge(version)).sum().toLong
  }

  /** Bytes the stores hold. */
  def bytes(sc: SparkContext): Long = {
    val index = id
    atEachStore(sc).map(p => RowImageStores.get(index, p).bytes).sum().toLong
  }

  /** Closes and deletes the stores, on the executors that still hold them. */
  def drop(sc: SparkContext): Unit = {
    val index = id
    atEachStore(sc).foreach(_ => RowImageStores.drop(index))
  }

  private def atEachStore(sc: SparkContext): RDD[Int] = new AtStoreRDD(sc.parallelize(0 until partitions, partitions), homes)
}

object RowImageIndex {
  /** A new, empty index of `partitions` stores, spread over the executors as Spark places a job's tasks. */
  def create(sc: SparkContext, partitions: Int): RowImageIndex = {
    val (id, homes) = LiveKeyIndex.placed(sc, partitions)(RowImageStores.create)
    new RowImageIndex(id, partitions, homes)
  }
}
