package eqdelete.write

import java.io.{ByteArrayInputStream, ByteArrayOutputStream, InputStream, ObjectInputStream, ObjectOutputStream, ObjectStreamClass}

import scala.reflect.ClassTag
import scala.util.Try
import scala.util.control.NonFatal

import org.apache.spark.{Partition, SparkException, TaskContext, TaskKilledException}
import org.apache.spark.rdd.RDD

/** What a write task returns to [[TaskWrittenFiles.gathered]]: its results, or the failure of its last attempt. */
sealed trait TaskOutcome[T] extends Serializable

object TaskOutcome {
  final case class Wrote[T](rows: Array[T]) extends TaskOutcome[T]
  final case class Failed[T](failure: TaskFailure) extends TaskOutcome[T]

  /**
   * `run`'s results, or, on the task's last allowed attempt (of `attempts`), its failure. Spark's
   * count of an index's attempts includes speculative copies and attempts lost with an executor,
   * which its failure limit does not: there a failure may be reported one retry early, failing
   * the job rather than leaving a file. A kill
   * and a fetch failure always throw: Spark must see them to end a cancelled job and to recompute
   * a lost shuffle (a fetch failure a task returns would fail the job instead).
   */
  def of[T](context: TaskContext, attempts: Int)(run: => Array[T]): TaskOutcome[T] =
    try Wrote(run) catch {
      case NonFatal(e) if context.attemptNumber() + 1 >= attempts && !context.isInterrupted() &&
          !e.isInstanceOf[TaskKilledException] && !fetchFailure(e) =>
        Failed(TaskFailure(context, e))
    }

  /**
   * Each partition of `writes` as one outcome. An RDD of its own, as its compute is where the
   * parent's partition is computed: a `mapPartitions` function gets the parent's iterator only
   * after the parent's compute ran, and the writes mostly happen there.
   */
  final class OfTasks[T: ClassTag](writes: RDD[T], attempts: Int) extends RDD[TaskOutcome[T]](writes) {
    override protected def getPartitions: Array[Partition] = firstParent[T].partitions
    override def compute(split: Partition, context: TaskContext): Iterator[TaskOutcome[T]] =
      Iterator.single(of(context, attempts)(firstParent[T].iterator(split, context).toArray))
  }

  /** Spark's FetchFailedException (private to Spark) anywhere in the chain of causes. */
  private def fetchFailure(e: Throwable): Boolean =
    Iterator.iterate(e)(_.getCause).takeWhile(_ != null).take(20).exists { cause =>
      Iterator.iterate[Class[_]](cause.getClass)(_.getSuperclass).takeWhile(_ != null)
        .exists(_.getName == "org.apache.spark.shuffle.FetchFailedException")
    }
}

/**
 * A task's failure, sent to the driver as its result. The exception travels Java-serialized
 * (Spark's result serializer may be Kryo), plain values around it; one that does not serialize
 * arrives as its text and stack trace, as Spark's own task failures do.
 */
final case class TaskFailure(partition: Int, attempt: Int, description: String, stack: String,
    serialized: Option[Array[Byte]]) {

  /** The failure on the driver, as Spark reports a failed job: a SparkException caused by the task's exception. */
  def exception(what: String): SparkException = {
    val cause = serialized.flatMap(bytes => Try(TaskFailure.read(bytes)).toOption)
      .getOrElse(new RuntimeException(s"$description\n$stack"))
    new SparkException(s"eqdelete: task $partition of $what failed (attempt ${attempt + 1}, its last): $description", cause)
  }
}

object TaskFailure {
  def apply(context: TaskContext, e: Throwable): TaskFailure = {
    val bytes = Try {
      val buffer = new ByteArrayOutputStream()
      val out = new ObjectOutputStream(buffer)
      out.writeObject(e)
      out.close()
      buffer.toByteArray
    }.toOption
    TaskFailure(context.partitionId(), context.attemptNumber(), e.toString, e.getStackTrace.mkString("\tat ", "\n\tat ", ""), bytes)
  }

  private def read(bytes: Array[Byte]): Throwable = {
    val in = new LoaderInput(new ByteArrayInputStream(bytes))
    try in.readObject().asInstanceOf[Throwable] finally in.close()
  }

  /** Resolves classes with the thread's loader, which holds the jars a session added. */
  private final class LoaderInput(in: InputStream) extends ObjectInputStream(in) {
    override def resolveClass(desc: ObjectStreamClass): Class[_] =
      Option(Thread.currentThread().getContextClassLoader)
        .flatMap(loader => Try[Class[_]](Class.forName(desc.getName, false, loader)).toOption)
        .getOrElse(super.resolveClass(desc))
  }
}
