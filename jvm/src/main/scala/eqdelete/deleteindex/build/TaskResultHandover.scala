package eqdelete.deleteindex.build

import java.util.concurrent.ConcurrentHashMap
import java.util.concurrent.atomic.AtomicLong

import scala.concurrent.ExecutionContext
import scala.reflect.ClassTag

import org.apache.spark.{SimpleFutureAction, SparkContext, TaskContext}
import org.apache.spark.rdd.RDD

/**
 * A job whose every task makes one result (its partition's first element) for the driver.
 * Where every task runs in the driver's own JVM (a `local` master), a task parks its result here
 * and Spark carries only its absence: Spark serializes a task's result, stores the bytes as a
 * block when past 1 MB, and the driver fetches and deserializes them, for an object already in
 * this JVM. At 10^7 string delete keys that was 286 MB of results, serialized and read back
 * while the read tasks wanted both cores. Elsewhere results go as Spark ships them.
 *
 * A result parked by a task whose job is cancelled or fails before the driver takes it is
 * dropped when the job ends.
 */
object TaskResultHandover {
  // Per live job, the results its tasks parked by partition. A task parks only while its job is
  // here (atomically, so one finishing after its job ended leaves nothing behind).
  private val live = new ConcurrentHashMap[Long, ConcurrentHashMap[Int, AnyRef]]()
  private val jobs = new AtomicLong()
  // Runs the clean-up on the thread that completes the job (Scala 2.12 has no `parasitic`).
  private val sameThread = ExecutionContext.fromExecutor((command: Runnable) => command.run())

  /**
   * Runs `rdd` as a job, handing each partition's first element to `handle` on Spark's
   * scheduler thread (keep it quick) as its task succeeds.
   */
  def submit[T <: AnyRef: ClassTag](context: SparkContext, rdd: RDD[T])(handle: (Int, T) => Unit): SimpleFutureAction[Unit] = {
    val partitions = 0 until rdd.getNumPartitions
    if (!context.isLocal) return context.submitJob(rdd, (rows: Iterator[T]) => rows.next(), partitions, handle, ())
    val job = jobs.incrementAndGet()
    live.put(job, new ConcurrentHashMap[Int, AnyRef]())
    val action = try context.submitJob(rdd, (rows: Iterator[T]) => park[T](job, TaskContext.getPartitionId(), rows.next()),
      partitions, (partition: Int, shipped: T) => handle(partition, if (shipped != null) shipped else take[T](job, partition)), ())
    catch { case e: Throwable => live.remove(job); throw e }
    action.onComplete(_ => live.remove(job))(sameThread)
    action
  }

  /** Each partition's first element of `rdd`, in partition order, as `runJob` returns them. */
  def collect[T <: AnyRef: ClassTag](context: SparkContext, rdd: RDD[T]): Array[T] = {
    val results = new Array[T](rdd.getNumPartitions)
    submit(context, rdd)((partition, result) => results(partition) = result).get()
    results
  }

  /**
   * Jobs whose results may still be parked: none once every job has ended (for tests; a job's
   * end reaches its clean-up just after it reaches `get()`).
   */
  private[build] def liveJobs: Int = live.size()

  /**
   * What the task ships: nothing, once its result is parked; the result itself where its job is
   * not here (this class loaded again for the task, as `spark.executor.userClassPathFirst` may),
   * or no longer (Spark ignores a result of a job that has ended).
   */
  private[build] def park[T](job: Long, partition: Int, result: T): T = {
    val parkedIn = live.computeIfPresent(job, (_, results) => { results.put(partition, result.asInstanceOf[AnyRef]); results })
    if (parkedIn == null) result else null.asInstanceOf[T]
  }

  private def take[T](job: Long, partition: Int): T = {
    val results = live.get(job)
    val result = if (results == null) null else results.remove(partition)
    // A task that shipped nothing parked its result before it reported success: never missing.
    require(result != null, s"eqdelete: no result parked for partition $partition of handover job $job")
    result.asInstanceOf[T]
  }
}
