package eqdelete.rowimages

import scala.reflect.ClassTag
import scala.util.control.NonFatal

import eqdelete.liveindex.{LiveKeyIndex, LiveKeyStore}
import eqdelete.state.{KeptStores, StateFiles}

import com.fasterxml.jackson.databind.JsonNode
import org.apache.spark.{SparkContext, TaskContext}
import org.apache.spark.internal.Logging
import org.apache.spark.rdd.RDD
import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.eqdelete.compat.EqDeleteConf

/**
 * A table's row images by key, held by the executors: one [[RowImageStore]] per partition of the
 * key's hash, each version of each checkpointed to durable storage ([[KeptStores]]), as the
 * live-row index's are ([[LiveKeyIndex]]). The driver holds only its id and its stores' states;
 * loads, changes and lookups are Spark jobs routing rows to their key's store, sorted there so a
 * task's seeks move forward.
 */
final class RowImageIndex private (val stores: KeptStores[RowImageStore]) {
  def id: String = stores.id
  def partitions: Int = stores.partitions

  /** `rows` (starting with a key's prefix), each at its key's store's partition, sorted there. */
  private def atStores[V: ClassTag](rows: RDD[(Array[Byte], V)]): RDD[(Array[Byte], V)] = {
    implicit val order: Ordering[Array[Byte]] = LiveKeyStore.EntryOrdering
    rows.repartitionAndSortWithinPartitions(LiveKeyIndex.byEntryKey(partitions))
  }

  /** Loads entries ([[RowImageStore.entry]] and value) into empty stores; how many. */
  def load(entries: RDD[(Array[Byte], Array[Byte])]): Long =
    stores.step(atStores(entries))((store, _, rows) => store.ingestSorted(rows)).sum

  /** Applies changes ([[RowImageStore.deleteChange]], [[RowImageStore.insertChange]] with the row): (inserted, removed). */
  def apply(changes: RDD[(Array[Byte], Array[Byte])]): (Long, Long) =
    stores.step(atStores(changes))((store, _, rows) => store.apply(rows))
      .fold((0L, 0L)) { case ((i1, r1), (i2, r2)) => (i1 + i2, r1 + r2) }

  /**
   * The rows of each key live at its version, with the key's tag: lazily, as an RDD whose tasks
   * read the stores at the version current now or any later one (a version's rows stay answerable
   * after it). `keys` are keys' prefixes ([[LiveKeyStore.keyPrefix]]) with a version and a tag; a
   * key given twice with one version and tag (a delete file naming a key twice) finds its rows once.
   */
  def lookup(keys: RDD[(Array[Byte], (Long, Int))]): RDD[(Int, Array[Byte])] =
    stores.read(atStores(keys), later = true) { (store, _, rows) =>
      val cursor = store.cursor()
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

  /**
   * Each row live at `version` of the keys whose prefixes are `keys`, as its entry and its bytes:
   * lazily, as [[lookup]]. A key given more than once finds its rows once.
   */
  def entries(keys: RDD[Array[Byte]], version: Long): RDD[(Array[Byte], Array[Byte])] =
    stores.read(atStores(keys.map(k => (k, ()))), later = true) { (store, _, rows) =>
      val cursor = store.cursor()
      TaskContext.get().addTaskCompletionListener[Unit](_ => cursor.close())
      var last: Array[Byte] = null
      rows.flatMap { case (prefix, _) =>
        if (last != null && java.util.Arrays.equals(last, prefix)) Vector.empty
        else {
          last = prefix
          val found = Vector.newBuilder[(Array[Byte], Array[Byte])]
          cursor.entriesAt(prefix, version)((entry, row) => found += ((entry, row)))
          found.result()
        }
      }
    }

  /** Removes the entries removed at or before `version`, at each store; how many. */
  def purge(sc: SparkContext, version: Long): Long =
    stores.step(sc.parallelize(0 until partitions, partitions))((store, _, _) => store.purge(version)).sum

  /** Bytes the stores hold. */
  def bytes(sc: SparkContext): Long = stores.storeBytes.getOrElse(stores.eachStore(sc)(_.bytes).sum)

  /** Closes and deletes the stores, on the executors that hold them, and their checkpoints. */
  def drop(sc: SparkContext): Unit = stores.drop(sc)
}

object RowImageIndex extends Logging {
  /** A new, empty index of `partitions` stores, checkpointed under `files`, a snapshot every `snapshotEvery` versions. */
  def create(files: StateFiles, partitions: Int, snapshotEvery: Int): RowImageIndex =
    new RowImageIndex(KeptStores.create(RowImageStores, files, partitions, snapshotEvery))

  /** The images a saved manifest describes (their stores load when first used). */
  def restored(files: StateFiles, manifest: KeptStores.Manifest, snapshotEvery: Int): RowImageIndex =
    new RowImageIndex(KeptStores.restored(RowImageStores, files, manifest, snapshotEvery))

  /** A new index for `session`: as many stores as `spark.eqdelete.changes.rowImageStores` says, under `files`. */
  def created(session: SparkSession, files: StateFiles): RowImageIndex = {
    val conf = session.sessionState.conf
    val stores = EqDeleteConf.changesRowImageStores(conf) match {
      case 0 => session.sparkContext.defaultParallelism
      case n => n.toInt
    }
    create(files, stores, EqDeleteConf.stateDeltasPerSnapshot(conf))
  }

  /**
   * The newest images saved under `files` whose driver state `usable` accepts and whose stores
   * all load and verify ([[KeptStores.newestLoadable]]), as `open` makes them of their index and
   * driver state, with the version restored; None when there are none, or they cannot be read
   * (logged, naming them `what`).
   */
  def restoreNewest[K](session: SparkSession, files: StateFiles, what: String)(usable: JsonNode => Boolean)(
      open: (RowImageIndex, JsonNode) => K)(index: K => RowImageIndex): Option[(K, Long)] = try {
    val sc = session.sparkContext
    val newest = KeptStores.newestLoadable(files)(m => Option(m.driver).exists(usable))(m =>
      open(restored(files, m, EqDeleteConf.stateDeltasPerSnapshot(session.sessionState.conf)), m.driver))(
      k => index(k).stores.unloadable(sc), k => index(k).stores.release(sc))
    val passed = newest.fold(identity, _.passedOver)
    if (passed.nonEmpty) logWarning(s"eqdelete: $what: saved versions passed over: ${passed.mkString("; ")}")
    newest.toOption.map(r => (r.index, r.manifest.version))
  } catch {
    case NonFatal(e) =>
      logWarning(s"eqdelete: $what could not be restored from ${files.root} (${e.getMessage})")
      None
  }
}
