package eqdelete.liveindex

import java.io.File
import java.util.concurrent.ConcurrentHashMap

import scala.jdk.CollectionConverters._

import org.apache.spark.SparkFiles

/**
 * The stores of one kind this JVM (an executor, or the driver in local mode) holds, by index and
 * partition. A store lives as long as its executor: one lost with it is missing here, and the
 * task that wanted it fails with [[LiveKeyStoreLostException]].
 *
 * @param kind   names the stores' directories
 * @param what   names an index of them in errors
 */
class ExecutorStores[S <: AutoCloseable](kind: String, what: String, open: (File, String) => S) {
  private val held = new ConcurrentHashMap[(String, Int), S]()

  /** A new, empty store for `partition` of `index`, replacing (and closing) any it had. */
  def create(index: String, partition: Int): S = {
    val store = open(new File(SparkFiles.getRootDirectory(), s"eqdelete-$kind-$index"), s"p$partition-")
    Option(held.put((index, partition), store)).foreach(_.close())
    store
  }

  /** The store of `partition` of `index`, or the failure that says it is lost. */
  def get(index: String, partition: Int): S = Option(held.get((index, partition))).getOrElse(
    throw new LiveKeyStoreLostException(s"eqdelete: partition $partition of the $what $index is not on this " +
      "executor (the executor holding it was lost, or the index was dropped)"))

  /** Closes and deletes this JVM's stores of `index`. */
  def drop(index: String): Unit =
    held.keySet().asScala.filter(_._1 == index).toSeq.foreach(k => Option(held.remove(k)).foreach(_.close()))
}

/** The live-row index's stores ([[LiveKeyStore]]). */
object LiveKeyStores extends ExecutorStores[LiveKeyStore]("live-index", "live-row index", LiveKeyStore.create)

/** Kept row images' stores ([[RowImageStore]]). */
object RowImageStores extends ExecutorStores[RowImageStore]("row-images", "row images", RowImageStore.create)

/** A partition of an executor-held index is not where it was built: the index must be built again. */
final class LiveKeyStoreLostException(message: String) extends RuntimeException(message)
