package eqdelete.deleteindex.build

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
    assertNothingParked()
  }

  test("submit hands each result to the handler as its task succeeds") {
    val seen = new ConcurrentHashMap[Int, Seq[Int]]()
    val rdd = context.parallelize(1 to 6, 3).mapPartitions(values => Iterator(Made(TaskContext.getPartitionId(), values.toVector)))
    TaskResultHandover.submit(context, rdd)((partition, result) => seen.put(partition, result.values)).get()
    assert(seen.size == 3 && seen.get(0) == Seq(1, 2) && seen.get(2) == Seq(5, 6))
    assertNothingParked()
  }

  test("a task's failure fails the job with its cause, and what other tasks parked is dropped") {
    val rdd = context.parallelize(1 to 4, 4).mapPartitions { values =>
      val value = values.next()
      // The failing task waits for the others to park (local[2]: two run at once, the rest after).
      if (value == 4) {
        Thread.sleep(300)
        throw new IllegalStateException("delete file gone")
      }
      Iterator(Made(TaskContext.getPartitionId(), Vector(value)))
    }
    val failure = intercept[Exception](TaskResultHandover.collect(context, rdd))
    assert(Iterator.iterate[Throwable](failure)(_.getCause).takeWhile(_ != null).exists(e => String.valueOf(e.getMessage).contains("delete file gone")))
    assertNothingParked()
  }

  test("a task that finds no job of its id here (its class loaded again, or its job ended) ships its result itself") {
    val result = Made(0, Vector(1))
    assert(TaskResultHandover.park(-1L, 0, result) eq result)
    assertNothingParked()
  }

  /** The job's end reaches the clean-up right after it reaches `get()`: waits for it. */
  private def assertNothingParked(): Unit = {
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
