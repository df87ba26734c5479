package eqdelete.resolve

import eqdelete.testing.{IcebergTables, TestSpark}

import org.scalatest.funsuite.AnyFunSuite

/** Which equality delete files a resolve removes and keeps, from metadata, under each kind of filter. */
class ResolveWorkSuite extends AnyFunSuite {

  private lazy val spark = TestSpark.session
  private lazy val tables = new IcebergTables(spark, "resolve")

  /** A table partitioned by p with deletes in p=0 and p=1 and one global delete. */
  private def withDeletes(body: String => Unit): Unit = {
    val table = tables.create(partitioned = true)
    tables.insert(table, (1L to 8L).map(k => (k, s"v$k", (k % 2).toInt)))
    tables.deleteKeys(table, Seq((2L, 0)))
    tables.deleteKeys(table, Seq((3L, 1)))
    tables.deleteKeys(table, Seq((5L, 1)), global = true)
    body(table)
  }

  private def work(table: String, where: String = null): ResolveWork = ResolveEqualityDeletes.workFor(spark, table, where)
  private def partitions(work: ResolveWork): Seq[String] =
    work.removable.map(f => if (f.partition().size() == 0) "global" else s"p=${f.partition().get(0, classOf[Integer])}").sorted
  private def deleteFiles(work: ResolveWork): Int = work.deletes.map(_.deleteFiles).getOrElse(0)

  test("no filter: every equality delete file goes, and every one is applied") {
    withDeletes { table =>
      val all = work(table)
      assert(partitions(all) == Seq("global", "p=0", "p=1") && all.kept == 0)
      assert(deleteFiles(all) == 3)
    }
  }

  test("a filter on the partition column: only the partitions it holds wholly; a global delete stays") {
    withDeletes { table =>
      val p0 = work(table, "p = 0")
      assert(partitions(p0) == Seq("p=0") && p0.kept == 2)
      assert(deleteFiles(p0) == 1, "the planned deletes apply only the removable file")
    }
  }

  test("a filter within partitions removes nothing; one Iceberg cannot evaluate on partitions is refused") {
    withDeletes { table =>
      val within = work(table, "v = 'v2'")
      assert(within.removable.isEmpty && within.kept == 3 && within.deletes.isEmpty)
      val error = intercept[IllegalArgumentException](work(table, "length(v) > 1"))
      assert(error.getMessage.contains("cannot evaluate it on partitions"))
    }
  }

  test("a table without snapshots has nothing to resolve") {
    val empty = work(tables.create(partitioned = true))
    assert(empty.removable.isEmpty && empty.kept == 0 && empty.deletes.isEmpty && empty.snapshotId == -1L)
  }
}
