package eqdelete.deleteindex.build

import java.lang.ref.WeakReference
import java.util.concurrent.ConcurrentHashMap
import java.util.concurrent.atomic.AtomicLong

import scala.reflect.ClassTag

import org.apache.spark.SparkContext
import org.apache.spark.broadcast.Broadcast

/**
 * A broadcast for tasks that run in the driver's own JVM (a `local` master): they get the
 * driver's object itself. Spark's broadcast serializes and compresses its value block by block
 * even there, for a copy no local task reads: at 10^7 delete keys, 0.4-0.5 s of the driver's
 * time between reading the deletes and reading the data (the scale benchmark). Serialized, it
 * is its id; read back in the same JVM, the driver's instance again.
 *
 * Held weakly by id: once the query and the index cache drop it, the collector takes it, as
 * Spark's cleaner takes an unreferenced broadcast. Read in another JVM it fails, naming itself;
 * `orSpark` uses it only where no task runs elsewhere.
 */
final class InProcessBroadcast[T: ClassTag] private (@transient private val held: T, key: Long)
  extends Broadcast[T](key) {

  override protected def getValue(): T = held
  override protected def doUnpersist(blocking: Boolean): Unit = ()
  override protected def doDestroy(blocking: Boolean): Unit = InProcessBroadcast.live.remove(key)
  override def toString: String = s"InProcessBroadcast($key)"

  // Java serialization's hook: the instance this JVM holds under the id, never a copy without its value.
  private def readResolve(): Object = {
    val ref = InProcessBroadcast.live.get(key)
    val held: AnyRef = if (ref == null) null else ref.get()
    if (held == null) {
      throw new IllegalStateException(s"eqdelete: in-process broadcast $key is not in this JVM: it was read where it was not made")
    }
    held
  }
}

object InProcessBroadcast {
  private val live = new ConcurrentHashMap[Long, WeakReference[AnyRef]]()
  // Negative, apart from Spark's own broadcast ids.
  private val ids = new AtomicLong()

  /** `value` broadcast in process where every task runs in this JVM (local mode), else by Spark. */
  def orSpark[T: ClassTag](context: SparkContext, value: T): Broadcast[T] =
    if (context.isLocal) apply(value) else context.broadcast(value)

  def apply[T: ClassTag](value: T): Broadcast[T] = {
    live.values().removeIf(_.get() == null) // those the collector took
    val broadcast = new InProcessBroadcast(value, ids.decrementAndGet())
    live.put(broadcast.id, new WeakReference[AnyRef](broadcast))
    broadcast
  }
}
