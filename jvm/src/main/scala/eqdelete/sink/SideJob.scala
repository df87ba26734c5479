package eqdelete.sink

import java.util.concurrent.{CompletableFuture, CompletionException, ExecutionException}

import scala.util.control.NonFatal

/**
 * Work of Spark jobs run on a thread of its own while the calling thread runs others, as Spark
 * collects a broadcast beside a query's other stages: a batch's jobs are a task or two each, so
 * two of them side by side overlap their planning and scheduling on the cores. The thread inherits
 * the caller's Spark local properties (job group, scheduler pool): cancelling the caller's jobs
 * cancels these too.
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
   * Once it is done, however long that takes (an interrupt of the caller does not stop the wait),
   * its result given to `undo` (the files it wrote deleted, when the caller failed); its own
   * failure, or one of `undo`'s, ignored: the caller's failure is the one that goes on.
   */
  def undoOnceDone(undo: T => Unit): Unit = try undo(outcome.join()) catch {
    case _: CompletionException =>
    case NonFatal(_) =>
  }
}

object SideJob {
  /** `body` started on a new thread named `name`. */
  def apply[T](name: String)(body: => T): SideJob[T] = new SideJob(name, () => body)
}
