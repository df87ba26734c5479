package eqdelete.sink

import java.util.concurrent.{CompletableFuture, CompletionException, ExecutionException}

import org.apache.spark.sql.eqdelete.compat.SparkInternals

/**
 * Work of Spark jobs run on a thread of its own while the calling thread runs others, as Spark
 * collects a broadcast beside a query's other stages: a batch's jobs are a task or two each, so
 * two of them side by side overlap their planning and scheduling on the cores. The thread starts
 * with the caller's Spark local properties (job group, job tags, scheduler pool, SQL execution)
 * and job artifacts: cancelling the caller's job group cancels its jobs too.
 */
final class SideJob[T] private (name: String, body: () => T) {
  private val outcome = new CompletableFuture[T]()
  private val thread = new Thread(() => try outcome.complete(body()) catch {
    case e: Throwable => outcome.completeExceptionally(e)
  }, name)
  thread.setDaemon(true)
  thread.start()

  /** Its result once it is done; its failure thrown as it was thrown. */
  def result(): T = try outcome.get() catch { case e: ExecutionException => throw e.getCause }

  /**
   * After the caller's `failure`: once this is done, however long that takes (an interrupt of the
   * caller does not stop the wait, and is asked again after it), its result given to `undo` (the
   * files it wrote deleted); its own failure, or `undo`'s, added to `failure` as suppressed.
   */
  def undoOnceDone(failure: Throwable)(undo: T => Unit): Unit = {
    val interrupted = Thread.interrupted()
    try undo(outcome.join()) catch {
      case e: CompletionException if e.getCause != failure => failure.addSuppressed(e.getCause)
      case e: Throwable if e != failure => failure.addSuppressed(e)
      case _: Throwable =>
    } finally if (interrupted) Thread.currentThread().interrupt()
  }
}

object SideJob {
  /** `body` started on a new thread named `name`. */
  def apply[T](name: String)(body: => T): SideJob[T] = new SideJob(name, SparkInternals.withThisThreadsArtifacts(() => body))
}
