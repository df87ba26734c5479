package eqdelete.write

import java.io.File
import java.nio.file.Files
import java.util.concurrent.{ConcurrentHashMap, CountDownLatch, TimeUnit}

import eqdelete.testing.TestSpark

import org.apache.hadoop.conf.Configuration
import org.apache.iceberg.hadoop.HadoopFileIO
import org.apache.spark.{SparkConf, SparkException, TaskContext}
import org.scalatest.funsuite.AnyFunSuite

/** A failed write job leaves no file behind, whichever task finishes when. */
class TaskWrittenFilesSuite extends AnyFunSuite {
  import TaskWrittenFilesSuite._

  private val context = TestSpark.session.sparkContext

  private def written(dir: File): Set[String] = Option(dir.listFiles()).toSeq.flatten.filter(_.isFile).map(_.getName).toSet

  test("a task finishing its files while another fails: the job waits for it, and both tasks' files are deleted") {
    val dir = Files.createTempDirectory("eqdelete-written").toFile
    val run = java.util.UUID.randomUUID().toString
    latches.put(run, Latches(new CountDownLatch(1), new CountDownLatch(1)))
    val path = dir.getAbsolutePath
    // local[2]: both tasks run at once. Task 1 closes its file, then holds its result until task 0
    // has thrown (Spark would end the job there and drop it); task 0 fails once task 1's file is closed.
    val writes = context.parallelize(0 until 2, 2).mapPartitions { _ =>
      val partition = TaskContext.getPartitionId()
      val latch = latches.get(run)
      val file = s"$path/part-$partition"
      val files = TaskWrittenFiles.deletingOnFailure[String](io, identity)(() => Seq(file)) {
        Files.write(new File(file).toPath, Array[Byte](1, 2, 3))
        if (partition == 0) {
          require(latch.closed.await(30, TimeUnit.SECONDS))
          latch.failing.countDown()
          throw new IllegalStateException("the store refused part-0")
        }
      }
      latch.closed.countDown()
      require(latch.failing.await(30, TimeUnit.SECONDS))
      Thread.sleep(500)
      Iterator(files)
    }
    val failure = intercept[SparkException](TaskWrittenFiles.gathered(writes, io, "a test write")(identity))
    assert(written(dir) == Set.empty)
    assert(failure.getMessage.startsWith("eqdelete: task 0 of a test write failed (attempt 1, its last): "), failure.getMessage)
    assert(failure.getCause.isInstanceOf[IllegalStateException] && failure.getCause.getMessage == "the store refused part-0")
  }

  test("all tasks written: their results in partition order, the files kept") {
    val dir = Files.createTempDirectory("eqdelete-written").toFile
    val path = dir.getAbsolutePath
    val writes = context.parallelize(0 until 5, 5).mapPartitions { _ =>
      val file = s"$path/part-${TaskContext.getPartitionId()}"
      Iterator(TaskWrittenFiles.deletingOnFailure[String](io, identity)(() => Seq(file))(Files.write(new File(file).toPath, Array[Byte](1))))
    }
    val files = TaskWrittenFiles.gathered(writes, io, "a test write")(identity)
    assert(files.map(_.map(f => new File(f).getName)) == (0 until 5).map(p => Seq(s"part-$p")))
    assert(written(dir) == (0 until 5).map(p => s"part-$p").toSet)
  }

  test("a failure that does not serialize arrives as its text and stack trace; a second failure as suppressed") {
    val writes = context.parallelize(0 until 3, 3).mapPartitions { _ =>
      if (TaskContext.getPartitionId() == 1) throw new Unserializable("no bytes for this one")
      if (TaskContext.getPartitionId() == 2) throw new IllegalStateException("and another")
      Iterator(Seq.empty[String])
    }
    val failure = intercept[SparkException](TaskWrittenFiles.gathered(writes, io, "a test write")(identity))
    val all = failure +: failure.getSuppressed.toSeq
    assert(all.size == 2, all)
    val unserializable = all.find(_.getMessage.contains("no bytes for this one")).get
    assert(unserializable.getMessage.contains("task 1 of a test write failed"))
    assert(unserializable.getCause.getClass == classOf[RuntimeException])
    assert(unserializable.getCause.getMessage.contains("\tat eqdelete.write.TaskWrittenFilesSuite"), unserializable.getCause.getMessage)
    assert(all.exists(f => f.getMessage.contains("task 2 of a test write failed") && f.getCause.isInstanceOf[IllegalStateException]))
  }

  test("the attempts a task has, read as SparkContext reads them") {
    val conf = new SparkConf(false)
    assert(TaskWrittenFiles.attemptsAllowed("local", conf) == 1)
    assert(TaskWrittenFiles.attemptsAllowed("local[2]", conf) == 1)
    assert(TaskWrittenFiles.attemptsAllowed("local[*]", conf) == 1)
    assert(TaskWrittenFiles.attemptsAllowed("local[*, 3]", conf) == 3)
    assert(TaskWrittenFiles.attemptsAllowed("local[2,5]", conf) == 5)
    assert(TaskWrittenFiles.attemptsAllowed("local-cluster[2,1,1024]", conf) == 4)
    assert(TaskWrittenFiles.attemptsAllowed("spark://host:7077", conf.clone.set("spark.task.maxFailures", "6")) == 6)
  }
}

object TaskWrittenFilesSuite {
  final case class Latches(closed: CountDownLatch, failing: CountDownLatch)
  // Shared by the tasks and the test: one JVM in local mode.
  val latches = new ConcurrentHashMap[String, Latches]()
  val io = new HadoopFileIO(new Configuration())

  /** An exception holding something Java serialization refuses. */
  final class Unserializable(message: String) extends RuntimeException(message) {
    val held = new Object
  }
}
