package org.apache.spark.sql.eqdelete.compat

import java.util.concurrent.TimeoutException

import org.apache.spark.{SparkContext, SparkEnv}
import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan
import org.apache.spark.sql.execution.{CommandExecutionMode, SparkPlan}
import org.apache.spark.sql.execution.adaptive.AdaptiveSparkPlanExec
import org.apache.spark.sql.execution.datasources.v2.BatchScanExec

/** Spark-private calls eqdelete makes outside the config declarations and filter translation. */
object SparkInternals {
  /**
   * Where a task runs, as a preferred location that pins a later task to this executor (Spark's
   * `executor_<host>_<id>` form, which its scheduler reads as an executor-cache location).
   */
  def executorLocation: String = {
    val env = SparkEnv.get
    s"executor_${env.blockManager.blockManagerId.host}_${env.executorId}"
  }

  /**
   * Waits, up to `timeoutMillis`, until Spark has delivered every pending listener event (query
   * executions included); false when the bus is still busy then, so callers may read a
   * slightly older state instead of failing.
   */
  def waitForListeners(session: SparkSession, timeoutMillis: Long = 60000L): Boolean =
    try {
      session.sparkContext.listenerBus.waitUntilEmpty(timeoutMillis)
      true
    } catch {
      case _: TimeoutException => false
    }

  /**
   * Plans the input partitions of every V2 scan of a physical plan (adaptive or not), which
   * Spark otherwise does when the query starts: Iceberg plans its files then. Runs no job.
   */
  def planScans(plan: SparkPlan): Unit = plan.foreach {
    case adaptive: AdaptiveSparkPlanExec => planScans(adaptive.inputPlan)
    case scan: BatchScanExec => scan.inputRDD.partitions
    case _ =>
  }

  /**
   * The optimized plan of a SQL statement, planned and not run: a command in it (an INSERT, a
   * CTAS) is analyzed and optimized, never executed, unlike `SparkSession.sql`.
   */
  def optimizedWithoutRunning(session: SparkSession, sqlText: String): LogicalPlan = {
    val parsed = session.sessionState.sqlParser.parsePlan(sqlText)
    session.sessionState.executePlan(parsed, CommandExecutionMode.SKIP).optimizedPlan
  }

  /** The running SparkContext, without creating one. */
  def activeContext: Option[SparkContext] = SparkContext.getActive

  /**
   * `body`, to be run on another thread, with this thread's job artifacts (a Spark Connect
   * session's own jars and classes), which Spark keeps in a thread local a new thread does not
   * inherit: as `SQLExecution.withThreadLocalCaptured` carries them to its threads.
   */
  def withThisThreadsArtifacts[T](body: () => T): () => T = {
    val state = org.apache.spark.JobArtifactSet.getCurrentJobArtifactState
    () => state.fold(body())(s => org.apache.spark.JobArtifactSet.withActiveJobArtifactState(s)(body()))
  }
}
