package eqdelete.state

import java.util.UUID

import scala.jdk.CollectionConverters._
import scala.reflect.ClassTag
import scala.util.Try
import scala.util.control.NonFatal

import com.fasterxml.jackson.databind.{JsonNode, ObjectMapper}

import org.apache.spark.SparkContext
import org.apache.spark.internal.Logging
import org.apache.spark.rdd.RDD
import org.apache.spark.util.AccumulatorV2
import org.apache.spark.sql.eqdelete.compat.SparkInternals

/**
 * The driver's side of one kept index: `partitions` stores ([[HeldStores]] on the executors),
 * the state of each at the index's current version (how any executor loads it), and where each
 * was last used (the executor its tasks prefer). The driver holds no entry of any store.
 *
 * Its state is saved ([[save]]) as a manifest `v{version}.json` in its own directory `{id}/`
 * under `files`, the directory of its table's indexes of its kind, beside the deltas and sorted
 * files its versions need; what no manifest kept (the last [[KeptManifests]] of them) and no
 * current version needs is purged. Two drivers keeping one table's index never write one
 * directory: each index has its own id, and one restored from another's manifest ([[restored]])
 * takes a new id and reads the other's files where they are.
 *
 * @param snapshotEvery  a store's deltas after its snapshot before a step ends with a new snapshot
 */
final class KeptStores[S <: RocksStore] private (held: HeldStores[S], val files: StateFiles, val id: String,
    initial: Array[StoreState], snapshotEvery: Int) extends Logging {
  import KeptStores._

  val partitions: Int = initial.length
  private val states = initial.clone()
  private val homes = new Array[String](partitions)
  /**
   * Where reads' tasks ran, store by store, folded into [[homes]] when the next job is planned
   * ([[where]]): after a restore, or a store loaded elsewhere, its next step would otherwise prefer
   * no executor (or the old one), and a task placed anywhere loads the store once more.
   */
  @volatile private var readAt: Option[HomesSeen] = None
  private var number = states.map(_.version.number).max
  private var bytesWritten = 0L
  private val sizes = Array.fill(partitions)(-1L)
  /** The manifests this index saved that are kept, oldest first, each with the files it needs: never read back. */
  private val saved = scala.collection.mutable.Queue.empty[(String, Set[String])]
  private var saves = 0L

  /** The state of each store at the current version. */
  def current: Seq[StoreState] = states.toSeq

  /** Bytes the steps wrote to durable storage, since the index was made here. */
  def written: Long = bytesWritten

  /** Bytes the current version's files take on durable storage. */
  def stored: Long = states.toSeq.flatMap(_.files).distinct.map(_.size).sum

  /** The executors the stores were last used on. */
  def executors: Int = where().filter(_ != null).distinct.length

  /**
   * One step of every store, a new version of each: task `p` runs `body` on store `p` with
   * partition `p` of `input` (routed to its store already). What each returned, by store.
   */
  def step[T: ClassTag, R: ClassTag](input: RDD[T])(body: (S, Int, Iterator[T]) => R): Array[R] = {
    require(input.getNumPartitions == partitions, s"${input.getNumPartitions} partitions for $partitions stores")
    number += 1
    val to = StoreVersion(number, UUID.randomUUID().toString.take(13))
    val (from, index, kept, stores) = (states.clone(), id, files, held.ref)
    val due = states.map(_.deltas.size + 1 >= snapshotEvery)
    val results = new AtStoreRDD(input, where()).mapPartitionsWithIndex { (p, rows) =>
      val ((result, size), state) = stores.get.step(index, kept, p, from(p), to, due(p)) { store =>
        val result = body(store, p, rows)
        store.flush()  // what the step wrote counted
        (result, store.bytes)
      }
      Iterator((p, result, size, state, SparkInternals.executorLocation))
    }.collect()
    synchronized {
      results.foreach { case (p, _, size, state, home) =>
        bytesWritten += (state.files.toSet -- from(p).files).toSeq.map(_.size).sum
        states(p) = state
        homes(p) = home
        sizes(p) = size
      }
    }
    results.sortBy(_._1).map(_._2)
  }

  /**
   * The bytes the stores hold on the executors, as each step's task found them (None before every
   * store was stepped here): a round's report needs no job of its own.
   */
  def storeBytes: Option[Long] = if (sizes.contains(-1L)) None else Some(sizes.sum)

  /**
   * Task `p` runs `body` on store `p` at the current version (or, `later`, one after it) with
   * partition `p` of `input`: lazily, as an RDD, which reads the version current now whenever it runs.
   */
  def read[T: ClassTag, U: ClassTag](input: RDD[T], later: Boolean)(body: (S, Int, Iterator[T]) => Iterator[U]): RDD[U] = {
    require(input.getNumPartitions == partitions, s"${input.getNumPartitions} partitions for $partitions stores")
    val (at, index, kept, stores) = (states.clone(), id, files, held.ref)
    val ranAt = readAt.getOrElse(synchronized {
      if (readAt.isEmpty) readAt = Some(new HomesSeen).map { a => input.sparkContext.register(a); a }
      readAt.get
    })
    new AtStoreRDD(input, where()).mapPartitionsWithIndex { (p, rows) =>
      val store = stores.get.at(index, kept, p, at(p), later)
      ranAt.add((p, SparkInternals.executorLocation))
      stores.get.droppedWhenUnreadable(index, p, store)(body(store, p, rows))
    }
  }

  /**
   * Loads every store at the current version where its task runs (a restored index, before it is
   * trusted): why each store that could not be loaded or did not verify could not, none when all
   * did. A task never fails for its store, so a damaged one costs one try, not Spark's retries.
   */
  def unloadable(sc: SparkContext): Seq[String] = {
    val (at, index, kept, stores) = (states.clone(), id, files, held.ref)
    val tried = new AtStoreRDD(sc.parallelize(0 until partitions, partitions), where()).mapPartitionsWithIndex { (p, _) =>
      val failure = try { stores.get.at(index, kept, p, at(p), later = false); None } catch {
        case lost: KeptStateLostException => Some(lost.getMessage)
      }
      Iterator((p, failure, SparkInternals.executorLocation))
    }.collect()
    synchronized(tried.foreach { case (p, failure, home) => if (failure.isEmpty) homes(p) = home })
    tried.sortBy(_._1).flatMap(_._2).toSeq
  }

  /** Where each store was last used, as far as the driver knows: the last step, or a read's task since. */
  private def where(): Array[String] = synchronized {
    readAt.foreach(_.drain().foreach { case (p, home) => homes(p) = home })
    homes.clone()
  }

  /** `body` on each store at the current version, one task each. */
  def eachStore[R: ClassTag](sc: SparkContext)(body: S => R): Array[R] =
    read(sc.parallelize(0 until partitions, partitions), later = false)((store, _, _) => Iterator(body(store))).collect()

  /**
   * Saves the current version's state, with the driver's own (`driver`), as this index's manifest,
   * and purges what older versions alone needed: this index's files no kept manifest needs, and
   * the directories of other indexes of the table no longer saved to (see [[StaleAfterMillis]]).
   * Bytes written.
   */
  def save(driver: JsonNode): Long = {
    val manifest = Mapper.createObjectNode()
    manifest.put("format", Format)
    manifest.put("index", id)
    manifest.put("version", number)
    manifest.put("savedAt", System.currentTimeMillis())
    val stores = manifest.putArray("stores")
    states.foreach(s => stores.add(StoreState.toJson(s)))
    manifest.set[JsonNode]("driver", driver)
    val rel = s"$id/v$number.json"
    val bytes = files.write(rel, Mapper.writeValueAsString(manifest))
    bytesWritten += bytes
    saved.enqueue(rel -> states.toSeq.flatMap(_.files.map(_.rel)).toSet)
    saves += 1
    try purge() catch {
      case NonFatal(e) => logWarning(s"eqdelete: purging old versions of kept state in ${files.root}: ${e.getMessage}")
    }
    bytes
  }

  /**
   * Deletes what no kept manifest needs. Each save deletes the files of the manifest it drops, from
   * what this index remembers (no listing, no manifest read: a round on an object store pays for
   * neither). Every [[ListEvery]] saves, and at the first, it lists the directory instead: files of
   * steps no manifest saved (a driver stopped between them), and the directories of other indexes
   * of the table no driver saved to for long (their driver is gone, or it builds anew).
   */
  private def purge(): Unit = {
    val dropped = Vector.newBuilder[(String, Set[String])]
    while (saved.size > KeptManifests) dropped += saved.dequeue()
    val needed = saved.flatMap { case (rel, its) => its + rel }.toSet
    if (saves % ListEvery != 1) {
      // Only this index's own files: one restored from another's manifest reads that one's files
      // where they are, and another driver may still need them.
      files.delete(dropped.result().flatMap { case (rel, its) => its + rel }.distinct.filter(_.startsWith(s"$id/")).filterNot(needed))
      return
    }
    val listed = files.list()
    files.delete(listed.map(_.rel).filter(_.startsWith(s"$id/")).filterNot(needed))
    val now = System.currentTimeMillis()
    listed.filterNot(_.rel.startsWith(s"$id/")).groupBy(_.rel.takeWhile(_ != '/')).foreach { case (other, its) =>
      val lastSaved = its.filter(f => manifestNumber(f.rel).isDefined).map(_.createdAtMillis)
      if (lastSaved.forall(_ < now - StaleAfterMillis) && !its.exists(f => needed(f.rel))) {
        logInfo(s"eqdelete: deleting the kept state of index $other in ${files.root}, unused since ${if (lastSaved.isEmpty) 0L else lastSaved.max}")
        files.delete(its.map(_.rel))
      }
    }
  }

  /** Lets go of the stores on the executors that hold them (as far as a job reaches them); their checkpoints stay. */
  def release(sc: SparkContext): Unit = {
    val (index, stores) = (id, held.ref)
    try new AtStoreRDD(sc.parallelize(0 until partitions, partitions), where()).foreach(_ => stores.get.drop(index))
    catch { case NonFatal(e) => logWarning(s"eqdelete: dropping the stores of $index: ${e.getMessage}") }
  }

  /** Drops the stores: on the executors that hold them, and their files on durable storage. */
  def drop(sc: SparkContext): Unit = {
    release(sc)
    try files.delete(files.list().map(_.rel).filter(_.startsWith(s"$id/")))
    catch { case NonFatal(e) => logWarning(s"eqdelete: deleting the kept state of $id in ${files.root}: ${e.getMessage}") }
  }
}

object KeptStores {
  private val Mapper = new ObjectMapper()
  private val Format = 1
  /** Manifests an index keeps (with the files they need): a plan made on an older version can still load it. */
  private val KeptManifests = 3
  /** Saves between two purges that list the state's directory. */
  private val ListEvery = 20
  /** How long an index's directory may go unsaved before another driver of its table deletes it. */
  private val StaleAfterMillis = 24L * 3600 * 1000

  /** A saved manifest: its index, version, stores' states, the driver's own state, when it was saved. */
  final case class Manifest(index: String, version: Long, states: Seq[StoreState], driver: JsonNode, savedAt: Long)

  /** New, empty stores of an index, under `files` (the directory of its table's indexes of its kind). */
  def create[S <: RocksStore](held: HeldStores[S], files: StateFiles, partitions: Int, snapshotEvery: Int): KeptStores[S] =
    new KeptStores(held, files, UUID.randomUUID().toString, Array.fill(partitions)(StoreState.Empty), snapshotEvery)

  /** An index at a saved manifest's version, under a new id: its stores load from the manifest's files when first used. */
  def restored[S <: RocksStore](held: HeldStores[S], files: StateFiles, manifest: Manifest, snapshotEvery: Int): KeptStores[S] =
    new KeptStores(held, files, UUID.randomUUID().toString, manifest.states.toArray, snapshotEvery)

  /** A restored index (what `open` made of `manifest`), with the newer versions passed over, each with why. */
  final case class Restored[T](index: T, manifest: Manifest, passedOver: Seq[String])

  /**
   * The newest version saved under `files` (by any driver: every kept manifest of every index's
   * directory, newest first) that `usable` accepts and whose stores all load and verify: `open`
   * makes an index of a manifest, `unloadable` loads its stores (why each could not be), `release`
   * lets go of one that failed. A version whose manifest cannot be read, or a file of which is
   * missing or of another size, is passed over without a load. Right: the version restored and
   * the newer ones passed over; Left: why each was passed over, when none was restored.
   */
  def newestLoadable[T](files: StateFiles)(usable: Manifest => Boolean)(
      open: Manifest => T)(unloadable: T => Seq[String], release: T => Unit): Either[Seq[String], Restored[T]] = {
    val listed = files.list()
    val sizes = listed.map(f => f.rel -> f.size).toMap
    val manifests = listed.flatMap(f => manifestNumber(f.rel).map(n => (n, f))).sortBy { case (n, f) => (-f.createdAtMillis, -n) }
    val passedOver = Vector.newBuilder[String]
    val restored = manifests.iterator.map { case (n, listedManifest) =>
      val what = s"version $n of ${listedManifest.rel.takeWhile(_ != '/')}"
      Try(readManifest(files, listedManifest.rel)).toEither.left.map(e => s"$what: its manifest cannot be read (${e.getMessage})")
        .flatMap(m => if (usable(m)) Right(m) else Left(""))
        .flatMap { m =>
          m.states.flatMap(_.files).collectFirst {
            case f if !sizes.contains(f.rel) => s"$what: its file ${f.rel} is missing"
            case f if sizes(f.rel) != f.size => s"$what: its file ${f.rel} holds ${sizes(f.rel)} bytes, not ${f.size}"
          }.toLeft(m)
        }
        .flatMap { m =>
          val index = open(m)
          val failed = try unloadable(index) catch { case NonFatal(e) => Seq(e.getMessage) }
          if (failed.isEmpty) Right(Restored(index, m, Nil))
          else { Try(release(index)); Left(s"$what: ${failed.head}${if (failed.size > 1) s" (and ${failed.size - 1} more stores)" else ""}") }
        }
    }.flatMap {
      case Left(why) => if (why.nonEmpty) passedOver += why; None
      case Right(r) => Some(r)
    }.find(_ => true)
    restored.map(_.copy(passedOver = passedOver.result())).toRight(passedOver.result())
  }

  private def readManifest(files: StateFiles, rel: String): Manifest = {
    val node = Mapper.readTree(files.read(rel))
    require(node.get("format").asInt() == Format, s"kept state format ${node.get("format")} in $rel")
    Manifest(node.get("index").asText(), node.get("version").asLong(),
      node.get("stores").elements().asScala.map(StoreState.fromJson).toVector, node.get("driver"), node.get("savedAt").asLong())
  }

  private val ManifestName = """[^/]+/v(\d+)\.json""".r

  private def manifestNumber(rel: String): Option[Long] = rel match {
    case ManifestName(n) => Some(n.toLong)
    case _ => None
  }
}

/**
 * The executor a read's task last ran on, by store: at most one entry a store however often the
 * reads run, merged on the driver as tasks end and drained there when a job is planned.
 */
private final class HomesSeen extends AccumulatorV2[(Int, String), Map[Int, String]] {
  private var seen = Map.empty[Int, String]
  override def isZero: Boolean = synchronized(seen.isEmpty)
  override def copy(): HomesSeen = synchronized { val c = new HomesSeen; c.seen = seen; c }
  override def reset(): Unit = synchronized { seen = Map.empty }
  override def add(v: (Int, String)): Unit = synchronized { seen += v }
  override def merge(other: AccumulatorV2[(Int, String), Map[Int, String]]): Unit = synchronized { seen ++= other.value }
  override def value: Map[Int, String] = synchronized(seen)
  /** What was seen since the last drain, and nothing after it. */
  def drain(): Map[Int, String] = synchronized { val v = seen; seen = Map.empty; v }
}
