package eqdelete.write

import scala.collection.mutable
import scala.reflect.ClassTag
import scala.util.Try
import scala.util.control.NonFatal

import org.apache.iceberg.io.FileIO
import org.apache.spark.{SparkConf, TaskContext, TaskKilledException}
import org.apache.spark.internal.Logging
import org.apache.spark.rdd.RDD

/**
 * Files written by a job's tasks for a commit the driver has not sent are never left behind when
 * the job fails or is cancelled (a round stopped): a task deletes its own files when its writing
 * fails or it is killed ([[deletingOnFailure]]), and the driver gathers each finished task's result
 * as the task finishes, as Spark's own writes gather task commit messages, so it deletes the files
 * of tasks that finished before the job ended ([[gathered]]): a cancelled job returns none of them.
 * A task's failure ends the job only after every task has finished ([[TaskOutcome]]).
 */
object TaskWrittenFiles extends Logging {

  /**
   * A task's writing (`write`), then its writers closed (`close`: the files written): the files.
   * When either fails, or the task was killed meanwhile, the files are deleted before the failure
   * goes on: no commit will name them. The kill is asked last, once the files are closed, so a
   * task killed during its writing never returns files its job will not gather.
   */
  def deletingOnFailure[F](io: FileIO, location: F => String)(close: () => Seq[F])(write: => Unit): Seq[F] = {
    var closed: Option[Seq[F]] = None
    def closedOnce(): Seq[F] = closed.getOrElse { val files = close(); closed = Some(files); files }
    try {
      write
      val files = closedOnce()
      if (Option(TaskContext.get()).exists(_.isInterrupted())) throw new TaskKilledException("killed while writing")
      files
    } catch {
      case failure: Throwable =>
        val interrupted = Thread.interrupted()  // a killed task's interrupt would fail the deletes too
        try Try(closedOnce()).getOrElse(closed.getOrElse(Nil)).map(location).distinct.foreach(path => Try(io.deleteFile(path)))
        finally if (interrupted) Thread.currentThread().interrupt()
        throw failure
    }
  }

  /**
   * Runs `rdd` as one job, each task's results gathered on the driver as it finishes: all of them,
   * in partition order. When the job fails or is cancelled, the files the finished tasks wrote
   * (`locations` of a result) are deleted before the failure goes on; `what` names the write in
   * a warning when one cannot be deleted.
   *
   * A task's last allowed attempt reports its failure as its result rather than throwing it: Spark
   * ends a job at its first failed task and drops the results of tasks finishing meanwhile, so a
   * task that wrote its files just then would leave them behind. Reported, the failure ends the job
   * only once every task has finished and its files are known. Earlier attempts throw, so Spark's
   * retries stay; a fetch failure or a kill always throws, so a lost shuffle is recomputed and a
   * cancelled job ends at once (its tasks delete their own files, [[deletingOnFailure]]).
   */
  def gathered[T: ClassTag](rdd: RDD[T], io: FileIO, what: String)(locations: T => Seq[String]): Seq[T] = {
    val finished = mutable.Map.empty[Int, Array[T]]
    val failed = mutable.ArrayBuffer.empty[TaskFailure]
    val attempts = attemptsAllowed(rdd.sparkContext.master, rdd.sparkContext.getConf)
    def files(): Seq[String] = finished.synchronized(finished.values.flatMap(_.toSeq).toVector).flatMap(locations)
    try {
      rdd.sparkContext.runJob(new TaskOutcome.OfTasks(rdd, attempts), (outcomes: Iterator[TaskOutcome[T]]) => outcomes.next(),
        (p: Int, outcome: TaskOutcome[T]) => finished.synchronized(outcome match {
          case TaskOutcome.Wrote(rows) => finished(p) = rows
          case TaskOutcome.Failed(failure) => failed += failure
        }))
    } catch {
      case failure: Throwable =>
        delete(io, files(), what)
        throw failure
    }
    finished.synchronized(failed.toVector) match {
      case first +: others =>
        delete(io, files(), what)
        val failure = first.exception(what)
        others.foreach(other => failure.addSuppressed(other.exception(what)))
        throw failure
      case _ => finished.synchronized(finished.toSeq.sortBy(_._1).flatMap(_._2.toSeq))
    }
  }

  /**
   * How many times Spark runs a task before failing its job: once in `local` and `local[n]`, `f`
   * times in `local[n, f]`, `spark.task.maxFailures` elsewhere (SparkContext's own reading).
   */
  private[write] def attemptsAllowed(master: String, conf: SparkConf): Int = master.trim match {
    case LocalWithFailures(failures) => failures.toInt
    case local if local == "local" || local.startsWith("local[") => 1
    case _ => conf.getInt("spark.task.maxFailures", 4)
  }

  private val LocalWithFailures = """local\[\s*(?:[0-9]+|\*)\s*,\s*([0-9]+)\s*\]""".r

  /**
   * Deletes files written for a commit that is known not to have landed (or was never sent). A
   * thread interrupted meanwhile (a stopped stream's) keeps its interrupt, asked again after the
   * deletes: object store clients give up calls made on an interrupted thread.
   */
  def delete(io: FileIO, locations: Seq[String], what: String): Unit = {
    val interrupted = Thread.interrupted()
    try locations.distinct.foreach { path =>
      try io.deleteFile(path) catch {
        case NonFatal(e) => logWarning(s"eqdelete: could not delete $path, written by $what that did not commit", e)
      }
    } finally if (interrupted) Thread.currentThread().interrupt()
  }
}
