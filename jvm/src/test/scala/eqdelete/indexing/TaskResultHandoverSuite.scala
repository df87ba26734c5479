package eqdelete.indexing

import java.util.concurrent.ConcurrentHashMap

import eqdelete.testing.TestSpark

import org.apache.spark.TaskContext
import org.scalatest.funsuite.AnyFunSuite

/** Local mode's task results: the driver gets the tasks' own objects, and nothing stays parked. */
class TaskResultHandoverSuite extends AnyFunSuite {
  import TaskResultHandoverSuite.{Made, made}

  private val context = TestSpark.session.sparkContext

  test("in local mode each partition's result is the object its task made, in partition order") {
    assert(context.isLocal)
    made.clear()
    val rdd = context.parallelize(1 to 40, 5).mapPartitions { values =>
      val result = Made(TaskContext.getPartitionId(), values.toVector)
      made.put(result.partition, result)
      Iterator(result)
    }
    val results = TaskResultHandover.collect(context, rdd)
    assert(results.map(_.partition).toSeq == (0 until 5))
    assert(results.flatMap(_.values).toSeq == (1 to 40))
    results.foreach(result => assert(result eq made.get(result.partition), "a copy, not the task's own result"))
    assert(TaskResultHandover.liveJobs == 0)
  }

  test("submit hands each result to the handler as its task succeeds") {
    val seen = new ConcurrentHashMap[Int, Seq[Int]]()
    val rdd = context.parallelize(1 to 6, 3).mapPartitions(values => Iterator(Made(TaskContext.getPartitionId(), values.toVector)))
    TaskResultHandover.submit(context, rdd)((partition, result) => seen.put(partition, result.values)).get()
    assert(seen.size == 3 && seen.get(0) == Seq(1, 2) && seen.get(2) == Seq(5, 6))
    assert(TaskResultHandover.liveJobs == 0)
  }

  test("a task's failure fails the job with its cause, and what other tasks parked is dropped") {
    val rdd = context.parallelize(1 to 4, 4).mapPartitions { values =>
      val value = values.next()
      if (value == 4) throw new IllegalStateException("delete file gone")
      Iterator(Made(TaskContext.getPartitionId(), Vector(value)))
    }
    val failure = intercept[Exception](TaskResultHandover.collect(context, rdd))
    assert(Iterator.iterate[Throwable](failure)(_.getCause).takeWhile(_ != null).exists(e => String.valueOf(e.getMessage).contains("delete file gone")))
    // The job's end is reported to its future on Spark's scheduler thread: wait for it.
    val deadline = System.nanoTime() + 10L * 1000 * 1000 * 1000
    while (TaskResultHandover.liveJobs != 0 && System.nanoTime() < deadline) Thread.sleep(10)
    assert(TaskResultHandover.liveJobs == 0)
  }
}

object TaskResultHandoverSuite {
  final case class Made(partition: Int, values: Vector[Int])
  // Written by the tasks, read by the test: one JVM in local mode.
  val made = new ConcurrentHashMap[Int, Made]()
}
