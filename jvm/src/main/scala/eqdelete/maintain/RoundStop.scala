package eqdelete.maintain

import java.util.concurrent.ConcurrentHashMap

import org.apache.spark.SparkContext

/**
 * A round's stop request, by the Spark job group the round runs in (`python -m eqdelete maintain`
 * gives each round its own, and asks for the stop on SIGTERM). A stopped round abandons what it has
 * not sent for commit: its Spark jobs are cancelled and it stops at its next step, its files
 * deleted as after any failure before a commit. A commit already being sent is never stopped:
 * it runs no Spark job, and the round checks again only after it.
 *
 * The round's jobs are cancelled by its group and by a job tag the round's thread carries
 * (`eqdelete-round-<group>`): a library the round calls may set a job group of its own (Iceberg's
 * `rewrite_data_files` runs its jobs as `REWRITE-DATA-FILES-n`, in threads of its own), which
 * replaces the group but not the tags, which its threads inherit.
 *
 * The step the round is at is kept for its report (`stopped_at`).
 */
final class RoundStop private (val jobGroup: Option[String]) {
  private val jobTag = jobGroup.map(RoundStop.tagOf)
  @volatile private var requested = false
  @volatile private var current = "starting"
  @volatile private var committing = false

  /** The step the round is at, or was at when stopped. */
  def step: String = current

  /** The round goes on to `step`, unless a stop was asked for. */
  def at(step: String): Unit = {
    current = step
    committing = false
    throwIfRequested()
  }

  /** A failure now is the stop's (its jobs cancelled), not one to report: stopped, and not sending a commit. */
  def explainsFailure: Boolean = requested && !committing

  /** The round is sending a commit (`step`), which no stop cuts short: its failure is its own. */
  def sending(step: String): Unit = {
    current = step
    committing = true
  }

  private def throwIfRequested(): Unit = if (requested) throw new RoundStoppedException(current)

  /** Waits `millis` (a wait between attempts), cut short by a stop. */
  def sleep(millis: Long): Unit = synchronized {
    val until = System.currentTimeMillis() + millis
    while (!requested && System.currentTimeMillis() < until) wait(math.max(1L, until - System.currentTimeMillis()))
    throwIfRequested()
  }

  private def request(sc: SparkContext): Unit = {
    synchronized { requested = true; notifyAll() }
    jobGroup.foreach(sc.cancelJobGroup)
    jobTag.foreach(sc.cancelJobsWithTag)
  }
}

/** Thrown inside a round to stop it; `step` is where it stopped. */
final class RoundStoppedException(val step: String) extends RuntimeException(s"eqdelete maintain: the round stopped at: $step")

object RoundStop {
  private val running = new ConcurrentHashMap[String, RoundStop]()

  /** The local property holding a thread's job group (`SparkContext.setJobGroup`). */
  private val JobGroupProperty = "spark.jobGroup.id"

  /** A round that cannot be stopped (run with no job group: a `CALL`, a Scala caller). */
  def never: RoundStop = new RoundStop(None)

  /** Runs `body` as the round of the calling thread's Spark job group, which [[stop]] can stop. */
  def around[A](sc: SparkContext)(body: RoundStop => A): A =
    Option(sc.getLocalProperty(JobGroupProperty)) match {
      case None => body(never)
      case Some(group) =>
        val stop = new RoundStop(Some(group))
        running.put(group, stop)
        sc.addJobTag(tagOf(group))
        try body(stop) finally {
          sc.removeJobTag(tagOf(group))
          running.remove(group, stop)
        }
    }

  /** The job tag of a round's group (a tag holds no comma). */
  private def tagOf(group: String): String = "eqdelete-round-" + group.replace(',', '_')

  /**
   * Stops the round running in `jobGroup`, if one is: its Spark jobs now, the round at its next
   * step. Jobs of the group started after the call are not cancelled: callers ask again until the
   * round has ended (the round checks between its steps, so at most one more job runs).
   */
  def stop(sc: SparkContext, jobGroup: String): Boolean = Option(running.get(jobGroup)) match {
    case Some(stop) => stop.request(sc); true
    case None => false
  }
}
