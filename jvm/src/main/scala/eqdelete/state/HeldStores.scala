package eqdelete.state

import java.io.File
import java.util.UUID
import java.util.concurrent.ConcurrentHashMap
import java.util.concurrent.locks.ReentrantLock

import scala.jdk.CollectionConverters._
import scala.util.control.NonFatal

import org.apache.spark.{SparkFiles, TaskContext}
import org.apache.spark.internal.Logging

/**
 * The stores of one kind this JVM (an executor, or the driver in local mode) holds, by index and
 * partition, each at a version. A task asks for a store at the version its job was planned on:
 * a store held here at that version serves it; any other is loaded here first, from the
 * version's snapshot and deltas on durable storage ([[StoreState]]), whichever executor built
 * it. So a task Spark runs elsewhere than the store's home (the executor is busy past the
 * locality wait, lost, removed) costs a download, never a failure, as with Spark's own state
 * store.
 *
 * A step ([[step]]) takes a store from one version to the next: what it changes is recorded as
 * the new version's delta on durable storage, or the new version is a snapshot (every few steps,
 * or when it changed the store in bulk). A step run again after it succeeded here (a retried or
 * speculative task) returns what it returned then; one that failed leaves no store here, so the
 * next task loads it again.
 *
 * @param kind  names the stores' directories
 * @param open  a store of this kind over a RocksDB directory (empty or loaded)
 */
class HeldStores[S <: RocksStore](kind: String, open: File => S) extends Logging {

  /** What tasks carry instead of this registry (one per JVM): it names the `object` that is one. */
  def ref: HeldStores.Ref[S] = HeldStores.Ref(getClass.getName)

  private final class Held(val store: S, @volatile var version: StoreVersion, @volatile var passed: Set[String],
      @volatile var uploaded: Map[String, StoredFile]) {
    private var users = 0
    private var retired = false
    def acquire(): Unit = synchronized(users += 1)
    /** Acquires the store unless it is retired (closed, or closing once its tasks complete). */
    def tryAcquire(): Boolean = synchronized { if (retired) false else { users += 1; true } }
    def release(): Unit = synchronized { users -= 1; if (retired && users == 0) store.close() }
    /** Closes the store once no task uses it. */
    def retire(): Unit = synchronized { retired = true; if (users == 0) store.close() }
  }

  private val held = new ConcurrentHashMap[(String, Int), Held]()
  private val locks = new ConcurrentHashMap[(String, Int), ReentrantLock]()
  /** Each store's last step here: its version's id, what it returned, the state it left. */
  private val lastStep = new ConcurrentHashMap[(String, Int), (String, Any, StoreState)]()
  /** How many stores this JVM loaded from durable storage, and their bytes: what a lost or busy executor costs. */
  private val loads = new java.util.concurrent.atomic.AtomicLong()

  def loaded: Long = loads.get()

  private def locked[A](key: (String, Int))(body: => A): A = {
    val lock = locks.computeIfAbsent(key, _ => new ReentrantLock())
    lock.lock()
    try body finally lock.unlock()
  }

  /**
   * The store of `partition` of `index` at `state`'s version, loaded here if this JVM does not
   * hold it at that version, or (`later`) at a version after it on its lineage (stores whose
   * entries keep their versions answer for earlier ones). Held for the running task: a store
   * loaded again meanwhile stays open until it completes.
   */
  def at(index: String, files: StateFiles, partition: Int, state: StoreState, later: Boolean): S = {
    val key = (index, partition)
    val h = locked(key) {
      val h = Option(held.get(key)).filter(h => h.version == state.version || (later && h.passed.contains(state.version.id)))
        .getOrElse(load(index, files, partition, state))
      h.acquire()
      h
    }
    Option(TaskContext.get()).foreach(_.addTaskCompletionListener[Unit](_ => h.release()))
    h.store
  }

  /**
   * `read`, a read of `store`, the store of `partition` of `index`, which drops that store here when
   * it finds it cannot be read ([[KeptStateLostException]]): never served again, the next task loads
   * it from durable storage (which fails in turn if the damage is there too). Only that store: one
   * another task loaded or stepped under the same key since stays.
   */
  def droppedWhenUnreadable[U](index: String, partition: Int, store: S)(read: => Iterator[U]): Iterator[U] = {
    val key = (index, partition)
    def guarded[A](body: => A): A = try body catch {
      case lost: KeptStateLostException =>
        locked(key)(if (Option(held.get(key)).exists(_.store eq store)) drop(key))
        throw lost
    }
    val rows = guarded(read)
    new Iterator[U] {
      override def hasNext: Boolean = guarded(rows.hasNext)
      override def next(): U = guarded(rows.next())
    }
  }

  /**
   * Takes the store of `partition` of `index` from `from` to version `to` by `body`, recording
   * what it changes; the new version is a snapshot when `snapshot` asks for one or `body` changed
   * the store in bulk. What `body` returned, and the state of version `to`.
   */
  def step[R](index: String, files: StateFiles, partition: Int, from: StoreState, to: StoreVersion, snapshot: Boolean)(
      body: S => R): (R, StoreState) = {
    val key = (index, partition)
    locked(key) {
      val done = Option(lastStep.get(key)).filter(_._1 == to.id).filter(_ => Option(held.get(key)).exists(_.version == to))
      done match {
        case Some((_, result, state)) => (result.asInstanceOf[R], state)
        case None =>
          val h = Option(held.get(key)).filter(_.version == from.version).getOrElse(load(index, files, partition, from))
          val scratch = new File(h.store.directory.getParentFile, s"delta-${UUID.randomUUID()}")
          try {
            val (result, bulk, empty) = recordedStep(h.store, scratch, body)
            val state =
              if (bulk || snapshot) StoreState(Some(snapshotOf(index, files, partition, h, to)), Nil)
              else if (empty) from.after(StoreDelta(to, None))
              else {
                val rel = s"$index/p$partition/${to.number}-${to.id}.delta"
                from.after(StoreDelta(to, Some(files.upload(scratch, rel, ""))))
              }
            h.version = to
            h.passed = h.passed + to.id
            if (bulk) warmLater(index, partition, h)
            lastStep.put(key, (to.id, result, state))
            (result, state)
          } catch {
            case e: Throwable =>
              // Half changed: never served again. The next task loads it from durable storage.
              drop(key)
              throw e
          } finally scratch.delete()
      }
    }
  }

  /** `body` on `store`, what it changes recorded in the local file `delta`: its result, whether it changed the store in bulk, whether it changed nothing. */
  private def recordedStep[R](store: S, delta: File, body: S => R): (R, Boolean, Boolean) = {
    val writer = new DeltaLog.Writer(new java.io.FileOutputStream(delta))
    var result: Option[R] = None
    val bulk = try store.recorded(writer) { result = Some(body(store)) } finally writer.close()
    (result.get, bulk, writer.isEmpty)
  }

  /** Uploads a snapshot of `h`'s store as version `to`: only the sorted files not uploaded before (they never change). */
  private def snapshotOf(index: String, files: StateFiles, partition: Int, h: Held, to: StoreVersion): StoreSnapshot = {
    val dir = new File(h.store.directory.getParentFile, s"checkpoint-${UUID.randomUUID()}")
    try {
      h.store.checkpoint(dir)
      val stored = dir.listFiles().toVector.sortBy(_.getName).map { f =>
        val name = f.getName
        h.uploaded.get(name).filter(_.size == f.length()).getOrElse {
          val rel = if (name.endsWith(".sst")) s"$index/p$partition/sst/${name.stripSuffix(".sst")}-${UUID.randomUUID()}.sst"
            else s"$index/p$partition/${to.number}-${to.id}/$name"
          files.upload(f, rel, name, immutable = name.endsWith(".sst"))
        }
      }
      h.uploaded = stored.filter(_.local.endsWith(".sst")).map(f => f.local -> f).toMap
      StoreSnapshot(to, stored, h.store.properties)
    } finally RocksStore.deleteRecursively(dir)
  }

  /** Loads `state` here from durable storage, in place of any version held. */
  private def load(index: String, files: StateFiles, partition: Int, state: StoreState): Held = {
    val started = System.nanoTime()
    val dir = RocksStore.freshDirectory(new File(SparkFiles.getRootDirectory(), s"eqdelete-$kind-$index"), s"p$partition-")
    val store = try try {
      state.snapshot.foreach(_.files.foreach(f => files.download(f, new File(dir, f.local), immutable = f.local.endsWith(".sst"))))
      val store = open(dir)
      try {
        state.snapshot.foreach(s => store.restore(s.properties))
        state.deltas.flatMap(_.file).foreach { f =>
          val in = files.openChecked(f)
          try store.replay(in, files.location(f.rel)) finally in.close()
        }
        if (state.snapshot.nonEmpty) store.verify()
        store
      } catch { case e: Throwable => store.close(); throw e }
    } catch { case e: Throwable => RocksStore.deleteRecursively(dir); throw e }
    catch {
      case NonFatal(e) =>
        val message = s"eqdelete: partition $partition of the $kind $index could not be loaded at version " +
          s"${state.version.number} from ${files.root}: ${e.getMessage}"
        throw (if (e.isInstanceOf[KeptStateDamagedException]) new KeptStateDamagedException(message, e)
          else new KeptStateLostException(message, e))
    }
    val h = new Held(store, state.version, state.versionIds.toSet,
      state.snapshot.toSeq.flatMap(_.files).filter(_.local.endsWith(".sst")).map(f => f.local -> f).toMap)
    Option(held.put((index, partition), h)).foreach(_.retire())
    loads.incrementAndGet()
    if (state.version != StoreState.EmptyVersion) {
      logInfo(s"eqdelete: loaded partition $partition of the $kind $index at version ${state.version.number} from " +
        s"${files.root} (${state.files.size} files, ${state.files.map(_.size).sum} bytes) in " +
        s"${(System.nanoTime() - started) / 1000000} ms")
      warmLater(index, partition, h)
    }
    h
  }

  /**
   * Reads `h`'s sorted files into the page cache ([[RocksStore.warm]]: those not cached already),
   * in the background: a store loaded in bulk or from a cold disk is otherwise cold, and its first
   * rounds' lookups are random reads from the disk. Only while every store held here fits in half
   * the page cache's room ([[PageCache]]): stores larger than the memory would only push each other out.
   */
  private def warmLater(index: String, partition: Int, h: Held): Unit = HeldStores.warmer.execute { () =>
    if (h.tryAcquire()) try {
      val all = held.values().asScala.toVector.flatMap(withStore(_)(_.bytes)).sum
      val room = PageCache.room.getOrElse(0L)
      if (all <= room / 2) {
        val started = System.nanoTime()
        val warmed = h.store.warm()
        logInfo(s"eqdelete: read partition $partition of the $kind $index into the page cache (${warmed.read} of its " +
          s"${warmed.bytes} bytes, the rest cached already) in ${(System.nanoTime() - started) / 1000000} ms")
      } else {
        logInfo(s"eqdelete: partition $partition of the $kind $index left out of the page cache: the stores held here " +
          s"take $all bytes, more than half of the page cache's room ($room bytes)")
      }
    } catch {
      case NonFatal(e) => logWarning(s"eqdelete: partition $partition of the $kind $index could not be read into the page cache", e)
    } finally h.release()
  }

  private def withStore[A](h: Held)(body: S => A): Option[A] =
    if (h.tryAcquire()) try Some(body(h.store)) finally h.release() else None

  private def drop(key: (String, Int)): Unit = {
    lastStep.remove(key)
    Option(held.remove(key)).foreach(_.retire())
  }

  /** Closes and deletes this JVM's stores of `index` (once the tasks using them complete). */
  def drop(index: String): Unit = held.keySet().asScala.filter(_._1 == index).toVector.foreach(key => locked(key)(drop(key)))
}

object HeldStores {
  /** One thread a JVM reads stores into the page cache on ([[HeldStores.warmLater]]): one disk, read in turn. */
  private val warmer = java.util.concurrent.Executors.newSingleThreadExecutor { (r: Runnable) =>
    val t = new Thread(r, "eqdelete-state-warmer")
    t.setDaemon(true)
    t
  }

  /** A registry of stores, named by its `object`'s class: serializable, and the same registry in every JVM. */
  final case class Ref[S <: RocksStore](objectClass: String) {
    @transient private lazy val resolved: HeldStores[S] =
      Class.forName(objectClass).getField("MODULE$").get(null).asInstanceOf[HeldStores[S]]
    def get: HeldStores[S] = resolved
  }
}
