package eqdelete.maintain

import scala.util.control.NonFatal

import eqdelete.commit.Failures
import eqdelete.liveindex.KeptLiveIndexes
import eqdelete.state.KeptStateLostException
import eqdelete.resolve.ResolveEqualityDeletes
import eqdelete.resolve.ResolveEqualityDeletes.{ResolveConflictException, ResolveFailedException}

import org.apache.spark.internal.Logging
import org.apache.spark.sql.SparkSession

/**
 * A round's resolve: attempts, each from the newest snapshot, until one commits or the attempts
 * run out, with a doubling wait after each conflict. Through the kept index of the live rows
 * when the round keeps one; a store of it that cannot be loaded makes that attempt plan as a
 * single resolve does (the index is a cache of the table), and the next round restores the
 * newest saved version that loads and verifies, or builds the index.
 *
 * @param resolved  the committed (or empty) resolve; None when every attempt conflicted
 * @param lastStart the snapshot the last attempt started from
 * @param lostIndex why the round went without its kept index, when it did
 */
final case class ResolveAttempts(resolved: Option[ResolveEqualityDeletes.Result], attempts: Int, conflicts: Seq[String],
    lastStart: Long, lostIndex: Option[String])

object ResolveAttempts extends Logging {

  /** The longest wait between two attempts. */
  private val MaxWaitMillis = 60000L

  /**
   * Runs the attempts; `beforeCommit(attempt)` runs between an attempt's writing and its commit
   * (tests put a concurrent commit there).
   */
  def run(session: SparkSession, tableName: String, settings: MaintainRound.Settings, keepIndex: Boolean,
      startingSnapshotId: Long, beforeCommit: Int => Unit, stop: RoundStop): ResolveAttempts = {
    val conflicts = Vector.newBuilder[String]
    var attempt = 0
    var resolved: Option[ResolveEqualityDeletes.Result] = None
    var lastStart = startingSnapshotId
    val stores = if (settings.liveIndexStores > 0) settings.liveIndexStores else session.sparkContext.defaultParallelism
    var lost: Option[String] = None
    def attemptWith(index: Boolean): ResolveEqualityDeletes.Result = {
      stop.at(if (index) "resolve: finding the rows through the kept index and writing their deletes"
        else "resolve: finding the rows and writing their deletes")
      val prepared =
        try {
          if (index) KeptLiveIndexes.prepare(session, tableName, stores, settings.liveIndex)
          else ResolveEqualityDeletes.prepare(session, tableName, null)
        } catch {
          // Its jobs cancelled by the stop: the failure they raise is the stop's.
          case NonFatal(_) if stop.explainsFailure => throw new RoundStoppedException(stop.step)
        }
      try {
        beforeCommit(attempt)
        stop.at("resolve: before its commit")
      } catch { case e: Throwable => prepared.abandon(); throw e }
      stop.sending("resolve: committing")  // no stop from here: the commit is sent and its outcome settled
      prepared.commit()
    }
    while (resolved.isEmpty && attempt < settings.maxAttempts) {
      if (attempt > 0) {
        stop.at("resolve: waiting to try again after a conflict")
        stop.sleep(math.min(MaxWaitMillis, settings.retryWaitMillis << math.min(attempt - 1, 16)))
      }
      attempt += 1
      try {
        resolved = Some(try attemptWith(keepIndex && lost.isEmpty) catch {
          case failed: ResolveFailedException if keepIndex && Failures.causes(failed).exists(_.isInstanceOf[KeptStateLostException]) =>
            lost = Some(s"a store of the kept index could not be loaded from its checkpoint (${Failures.describe(failed)}); " +
              "this round found the rows without it, and the next restores the newest saved version that loads, or builds it")
            logWarning(s"eqdelete maintain: $tableName: ${lost.get}")
            KeptLiveIndexes.forget(session, tableName)
            attemptWith(index = false)
        })
      } catch {
        case conflict: ResolveConflictException =>
          logWarning(s"eqdelete maintain: attempt $attempt of ${settings.maxAttempts} on $tableName conflicted: ${conflict.getMessage}")
          lastStart = conflict.startingSnapshotId
          conflicts += conflict.getMessage
      }
    }
    ResolveAttempts(resolved, attempt, conflicts.result(), lastStart, lost)
  }

  /** A round that resolves nothing (deferred). */
  def none(startingSnapshotId: Long): ResolveAttempts = ResolveAttempts(None, 0, Nil, startingSnapshotId, None)
}
