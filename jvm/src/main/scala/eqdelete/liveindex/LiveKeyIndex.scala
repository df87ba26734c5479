package eqdelete.liveindex

import scala.collection.mutable
import scala.reflect.ClassTag

import eqdelete.state.{KeptStores, StateFiles}

import org.apache.spark.{HashPartitioner, Partitioner, SparkContext, TaskContext}
import org.apache.spark.rdd.RDD

/** A live row as the index holds it: its key's packed bytes ([[eqdelete.deleteindex.KeyBytes]]), its data file's id and position. */
final case class LiveKeyEntry(key: Array[Byte], file: Int, position: Long)

/**
 * An index of live rows by key, held by the executors: one [[LiveKeyStore]] per partition of
 * the key's hash ([[LiveKeyStores]]), each version of each checkpointed to durable storage
 * ([[KeptStores]]), so a task loads its store wherever Spark runs it, and prefers the executor
 * that last held it. The driver holds only the index's id and its stores' states. Nothing
 * gathers on the driver: adds and lookups are Spark jobs routing rows to their key's store, and
 * a lookup's finds are removed at the store that found them.
 */
final class LiveKeyIndex private (val stores: KeptStores[LiveKeyStore]) {

  def id: String = stores.id
  def partitions: Int = stores.partitions

  private val byStore: Partitioner = new HashPartitioner(partitions)  // keys are store numbers already

  /** `rows`, each moved to the partition of the store its key belongs to. */
  private def routed[T: ClassTag](rows: RDD[T])(key: T => Array[Byte]): RDD[T] = {
    val n = partitions
    rows.map(r => (LiveKeyStore.partitionOfKey(key(r), key(r).length, n), r)).partitionBy(byStore).values
  }

  /** Loads entries into empty stores the fast way (Spark sorts each store's entries; the store ingests one file). */
  def load(entries: RDD[LiveKeyEntry]): Long = {
    implicit val order: Ordering[Array[Byte]] = LiveKeyStore.EntryOrdering
    val sorted = entries.map(e => (LiveKeyStore.entry(e.key, e.key.length, e.file, e.position), null: Array[Byte]))
      .repartitionAndSortWithinPartitions(LiveKeyIndex.byEntryKey(partitions))
    stores.step(sorted)((store, _, rows) => store.ingestSorted(rows.map(_._1))).sum
  }

  /** Adds entries; how many. */
  def add(entries: RDD[LiveKeyEntry]): Long =
    stores.step(routed(entries)(_.key)) { (store, _, rows) =>
      var n = 0L
      rows.foreach { e => store.add(e.key, e.key.length, e.file, e.position); n += 1 }
      n
    }.sum

  /**
   * Removes entries [[lookup]] found, given as the RDD it returned or one derived from it
   * partition for partition (a map, a filter): each partition is its store's and holds a key's
   * entries together (its keys were sorted), so nothing is shuffled, and an entry found twice (by
   * two delete rows of one key) is removed and counted once. How many entries were removed.
   */
  def removeFound(found: RDD[LiveKeyEntry]): Long = {
    val (index, n) = (id, partitions)
    stores.step(found) { (store, p, rows) =>
      var removed = 0L
      LiveKeyIndex.onceEach(rows)(e => e).foreach { e =>
        if (LiveKeyStore.partitionOfKey(e.key, e.key.length, n) != p) {
          throw new IllegalStateException(s"eqdelete: an entry given to store $p of the live-row index $index is another store's")
        }
        store.remove(e.key, e.key.length, e.file, e.position)
        removed += 1
      }
      removed
    }.sum
  }

  /**
   * Every entry of each key of `keys`, with the key's payload (a delete row's sequence number and
   * scope, say): lazily, as an RDD whose tasks read the stores at the version current now. Spark
   * sorts each store's keys (spilling past memory), so a task's lookups share one iterator and
   * seek forward only.
   */
  def lookup[T: ClassTag](keys: RDD[(Array[Byte], T)]): RDD[(T, Int, Long)] = {
    implicit val order: Ordering[Array[Byte]] = LiveKeyStore.EntryOrdering
    val sorted = keys.map { case (key, payload) => (LiveKeyStore.keyPrefix(key, key.length), payload) }
      .repartitionAndSortWithinPartitions(LiveKeyIndex.byEntryKey(partitions))
    stores.read(sorted, later = false) { (store, _, rows) =>
      val cursor = store.cursor()
      TaskContext.get().addTaskCompletionListener[Unit](_ => cursor.close())
      rows.flatMap { case (prefix, payload) =>
        val found = Vector.newBuilder[(T, Int, Long)]
        cursor.entriesOf(prefix)((file, position) => found += ((payload, file, position)))
        found.result()
      }
    }
  }

  /** Removes the entries of every file id in `gone`, at each store; how many. */
  def purge(sc: SparkContext, gone: Set[Int]): Long =
    stores.step(sc.parallelize(0 until partitions, partitions))((store, _, _) => store.purge(gone)).sum

  /** Bytes the stores hold, on the executors' disks and in RocksDB's memtables. */
  def bytes(sc: SparkContext): Long = stores.storeBytes.getOrElse(stores.eachStore(sc)(_.bytes).sum)

  /** The executors that last held the stores. */
  def executors: Int = stores.executors

  /** Closes and deletes the stores, on the executors that hold them, and their checkpoints. */
  def drop(sc: SparkContext): Unit = stores.drop(sc)
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
  private[eqdelete] def byEntryKey(n: Int): Partitioner = new Partitioner {
    override def numPartitions: Int = n
    override def getPartition(entry: Any): Int = LiveKeyStore.partitionOf(entry.asInstanceOf[Array[Byte]], n)
  }

  /** A new, empty index of `partitions` stores, checkpointed under `files`, a snapshot every `snapshotEvery` versions. */
  def create(files: StateFiles, partitions: Int, snapshotEvery: Int): LiveKeyIndex =
    new LiveKeyIndex(KeptStores.create(LiveKeyStores, files, partitions, snapshotEvery))

  /** The index a saved manifest describes (its stores load when first used). */
  def restored(files: StateFiles, manifest: KeptStores.Manifest, snapshotEvery: Int): LiveKeyIndex =
    new LiveKeyIndex(KeptStores.restored(LiveKeyStores, files, manifest, snapshotEvery))
}
