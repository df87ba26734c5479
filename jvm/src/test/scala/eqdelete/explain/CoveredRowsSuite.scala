package eqdelete.explain

import org.scalatest.funsuite.AnyFunSuite

/** The covered-row counter counts each (part, partition) once, however often it is reported. */
class CoveredRowsSuite extends AnyFunSuite {

  private def taskCounting(part: Int, partition: Int, rows: Long): CoveredRows = {
    val task = new CoveredRows
    task.add((CoveredRows.key(part, partition), 0L)) // a task reports its partition first
    (1L to rows).foreach(_ => task.add((CoveredRows.key(part, partition), 1L)))
    task
  }

  test("unknown until some part reports, then the sum over parts and partitions") {
    val driver = new CoveredRows
    assert(driver.rows.isEmpty)
    driver.merge(taskCounting(0, 0, 0))
    assert(driver.rows.contains(0L))
    driver.merge(taskCounting(0, 1, 3))
    driver.merge(taskCounting(1, 0, 2)) // the same partition number in another part
    assert(driver.rows.contains(5L))
  }

  test("a retried task or a plan run again replaces its partition's count") {
    val driver = new CoveredRows
    driver.merge(taskCounting(0, 0, 4))
    driver.merge(taskCounting(0, 0, 4))
    driver.record(1, 7)
    driver.record(1, 7)
    assert(driver.rows.contains(11L))
  }
}
