package eqdelete.liveindex

import scala.collection.mutable
import scala.reflect.ClassTag

import org.apache.spark.{HashPartitioner, Partitioner, SparkContext, TaskContext}
import org.apache.spark.rdd.RDD
import org.apache.spark.sql.eqdelete.compat.SparkInternals

/** A live row as the index holds it: its key's packed bytes ([[eqdelete.deleteindex.KeyBytes]]), its data file's id and position. */
final case class LiveKeyEntry(key: Array[Byte], file: Int, position: Long)

/**
 * An index of live rows by key, held by the executors: one [[LiveKeyStore]] per partition of
 * the key's hash, each on the executor that created it ([[LiveKeyStores]]), whose tasks later
 * jobs prefer ([[AtStoreRDD]]). The driver holds only the index's id and where its stores are.
 * Nothing gathers on the driver: adds and lookups are Spark jobs routing rows to their key's
 * store, and a lookup's finds are removed at the store that found them. A store lost with its
 * executor fails the job with [[LiveKeyStoreLostException]] in its cause: the caller builds the
 * index again from the table.
 */
final class LiveKeyIndex private (val id: String, val partitions: Int, homes: Array[String]) {

  private val byStore: Partitioner = new HashPartitioner(partitions)  // keys are store numbers already

  /** `rows`, each moved to the task of the store its key belongs to. */
  private def routed[T: ClassTag](rows: RDD[T])(key: T => Array[Byte]): RDD[T] = {
    val n = partitions
    new AtStoreRDD(rows.map(r => (LiveKeyStore.partitionOfKey(key(r), key(r).length, n), r)).partitionBy(byStore).values,
      homes)
  }

  /** Loads entries into empty stores the fast way (Spark sorts each store's entries; the store ingests one file). */
  def load(entries: RDD[LiveKeyEntry]): Long = {
    val (index, n) = (id, partitions)
    implicit val order: Ordering[Array[Byte]] = LiveKeyStore.EntryOrdering
    val sorted = entries.map(e => (LiveKeyStore.entry(e.key, e.key.length, e.file, e.position), null: Array[Byte]))
      .repartitionAndSortWithinPartitions(LiveKeyIndex.byEntryKey(n))
    new AtStoreRDD(sorted, homes).mapPartitionsWithIndex { (p, rows) =>
      Iterator(LiveKeyStores.get(index, p).ingestSorted(rows.map(_._1)))
    }.sum().toLong
  }

  /** Adds entries; how many. */
  def add(entries: RDD[LiveKeyEntry]): Long = {
    val index = id
    routed(entries)(_.key).mapPartitionsWithIndex { (p, rows) =>
      val store = LiveKeyStores.get(index, p)
      var n = 0L
      rows.foreach { e => store.add(e.key, e.key.length, e.file, e.position); n += 1 }
      store.flush()
      Iterator(n)
    }.sum().toLong
  }

  /**
   * Removes entries [[lookup]] found, given as the RDD it returned or one derived from it
   * partition for partition (a map, a filter): each partition is its store's and holds a key's
   * entries together (its keys were sorted), so nothing is shuffled, and an entry found twice (by
   * two delete rows of one key) is removed and counted once. How many entries were removed.
   */
  def removeFound(found: RDD[LiveKeyEntry]): Long = {
    require(found.getNumPartitions == partitions, s"${found.getNumPartitions} partitions of found entries for $partitions stores")
    val (index, n) = (id, partitions)
    new AtStoreRDD(found, homes).mapPartitionsWithIndex { (p, rows) =>
      val store = LiveKeyStores.get(index, p)
      var removed = 0L
      LiveKeyIndex.onceEach(rows)(e => e).foreach { e =>
        if (LiveKeyStore.partitionOfKey(e.key, e.key.length, n) != p) {
          throw new IllegalStateException(s"eqdelete: an entry given to store $p of the live-row index $index is another store's")
        }
        store.remove(e.key, e.key.length, e.file, e.position)
        removed += 1
      }
      store.flush()
      Iterator(removed)
    }.sum().toLong
  }

  /**
   * Every entry of each key of `keys`, with the key's payload (a delete row's sequence number and
   * scope, say): lazily, as an RDD whose tasks run at the stores. Spark sorts each store's keys
   * (spilling past memory), so a task's lookups share one iterator and seek forward only.
   */
  def lookup[T: ClassTag](keys: RDD[(Array[Byte], T)]): RDD[(T, Int, Long)] = {
    val (index, n) = (id, partitions)
    implicit val order: Ordering[Array[Byte]] = LiveKeyStore.EntryOrdering
    val sorted = keys.map { case (key, payload) => (LiveKeyStore.keyPrefix(key, key.length), payload) }
      .repartitionAndSortWithinPartitions(LiveKeyIndex.byEntryKey(n))
    new AtStoreRDD(sorted, homes).mapPartitionsWithIndex { (p, rows) =>
      val cursor = LiveKeyStores.get(index, p).cursor()
      TaskContext.get().addTaskCompletionListener[Unit](_ => cursor.close())
      rows.flatMap { case (prefix, payload) =>
        val found = Vector.newBuilder[(T, Int, Long)]
        cursor.entriesOf(prefix)((file, position) => found += ((payload, file, position)))
        found.result()
      }
    }
  }

  /** Removes the entries of every file id in `gone`, at each store; how many. */
  def purge(sc: SparkContext, gone: Set[Int]): Long = {
    val (index, ids) = (id, sc.broadcast(gone))
    try atEachStore(sc).map(p => LiveKeyStores.get(index, p).purge(ids.value.contains)).sum().toLong
    finally ids.destroy()
  }

  /** Bytes the stores hold, on the executors' disks and in RocksDB's memtables. */
  def bytes(sc: SparkContext): Long = {
    val index = id
    atEachStore(sc).map(p => LiveKeyStores.get(index, p).bytes).sum().toLong
  }

  /** The executors holding the stores. */
  def executors: Int = homes.distinct.length

  /** Closes and deletes the stores, on the executors that still hold them. */
  def drop(sc: SparkContext): Unit = {
    val index = id
    atEachStore(sc).foreach(_ => LiveKeyStores.drop(index))
  }

  /** One task per store, at its executor, given the store's number. */
  private def atEachStore(sc: SparkContext): RDD[Int] = new AtStoreRDD(sc.parallelize(0 until partitions, partitions), homes)
}

object LiveKeyIndex {
  /**
   * `rows` of a partition [[LiveKeyIndex.lookup]] gave (or derived from one in order), each
   * entry once: a key's finds lie together there, so only the current key's are remembered.
   */
  def onceEach[T](rows: Iterator[T])(entry: T => LiveKeyEntry): Iterator[T] = {
    var key: Array[Byte] = null
    val ofKey = mutable.HashSet.empty[(Int, Long)]
    rows.filter { row =>
      val e = entry(row)
      if (key == null || !java.util.Arrays.equals(key, e.key)) { key = e.key; ofKey.clear() }
      ofKey.add((e.file, e.position))
    }
  }

  /** Entries, or keys' prefixes (which start as their entries do), to their key's store of `n`. */
  private[liveindex] def byEntryKey(n: Int): Partitioner = new Partitioner {
    override def numPartitions: Int = n
    override def getPartition(entry: Any): Int = LiveKeyStore.partitionOf(entry.asInstanceOf[Array[Byte]], n)
  }

  /** A new, empty index of `partitions` stores, spread over the executors as Spark places a job's tasks. */
  def create(sc: SparkContext, partitions: Int): LiveKeyIndex = {
    val (id, homes) = placed(sc, partitions)(LiveKeyStores.create)
    new LiveKeyIndex(id, partitions, homes)
  }

  /** A new index's id and where its `partitions` stores are, each made by `create(id, partition)` as Spark places a job's tasks. */
  private[liveindex] def placed(sc: SparkContext, partitions: Int)(create: (String, Int) => Any): (String, Array[String]) = {
    val id = java.util.UUID.randomUUID().toString
    val homes = sc.parallelize(0 until partitions, partitions).map { p =>
      create(id, p)
      (p, SparkInternals.executorLocation)
    }.collect().sortBy(_._1).map(_._2)
    (id, homes)
  }
}
