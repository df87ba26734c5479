package eqdelete.deleteindex.build

import eqdelete.deleteindex.{DeleteKeyIndex, LongKeyIndex}
import eqdelete.testing.TestSpark

import org.apache.spark.sql.types.LongType
import org.scalatest.funsuite.AnyFunSuite

/** Local mode's broadcast: the tasks get the driver's index itself, through the handle the filter reads. */
class InProcessBroadcastSuite extends AnyFunSuite {

  private def index(): DeleteKeyIndex = {
    val index = DeleteKeyIndex.forKeyTypes(Seq(LongType), 4, 3)
    index.add(DeleteKeyIndex.GlobalScope, Array[Any](7L), 3)
    index.seal()
  }

  test("in local mode the handle reads back as the driver's own broadcast, value and all") {
    val context = TestSpark.session.sparkContext
    assert(context.isLocal)
    val broadcast = InProcessBroadcast.orSpark(context, index())
    assert(broadcast.isInstanceOf[InProcessBroadcast[_]])
    val read = BroadcastHandle.read(BroadcastHandle.write(broadcast))
    assert(read eq broadcast)
    assert(read.value.newestOf(0L, Array[Any](7L)) == 3L)
    assert(read.value.isInstanceOf[LongKeyIndex])
    // And in a task, as the filter's expression reads it.
    val handle = BroadcastHandle.write(broadcast)
    assert(context.parallelize(Seq(1), 1).map(_ => BroadcastHandle.read(handle).value.newestOf(0L, Array[Any](7L))).collect().toSeq == Seq(3L))
  }

  test("a handle read where its broadcast is not held fails, naming it, never an empty index") {
    val broadcast = InProcessBroadcast(index())
    val handle = BroadcastHandle.write(broadcast)
    broadcast.destroy()
    val failure = intercept[IllegalStateException](BroadcastHandle.read(handle))
    assert(failure.getMessage.contains(s"in-process broadcast ${broadcast.id} is not in this JVM"))
  }
}
