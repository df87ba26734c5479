package eqdelete.maintain

import scala.jdk.CollectionConverters._

import eqdelete.cost.LiveIndexSetting
import eqdelete.planning.LiveDeleteFiles
import eqdelete.testing.{IcebergTables, TestSpark}

import org.apache.iceberg.exceptions.ValidationException
import org.apache.spark.sql.eqdelete.compat.{IcebergInternals, IcebergSparkTables}
import org.scalatest.funsuite.AnyFunSuite

/**
 * maintain's compaction of v2 position delete files against commits made between its writing and
 * its commit, and the sequence numbers of what it writes. Rows are checked against those written,
 * with eqdelete off.
 */
class PositionDeleteCompactionSuite extends AnyFunSuite {

  private lazy val spark = TestSpark.session
  private lazy val tables = new IcebergTables(spark, "compaction")
  private val resolveOnly = MaintainRound.Settings(maxAttempts = 1, retryWaitMillis = 1, compactPositionDeleteFiles = 0,
    liveIndex = LiveIndexSetting.Never)

  /** An unpartitioned table of keys 1..40 in two data files, after `rounds` resolves of one deleted key each (a partition-wide file each). */
  private def table(rounds: Int): String = {
    val name = tables.create()
    tables.insert(name, (1L to 20L).map(k => (k, s"v$k", 0)))
    tables.insert(name, (21L to 40L).map(k => (k, s"v$k", 0)))
    (1 to rounds).foreach(r => resolved(name, Seq(r.toLong, 20L + r)))
    name
  }

  private def resolved(name: String, keys: Seq[Long]): Unit = {
    tables.deleteKeys(name, keys.map(k => (k, 0)))
    assert(MaintainRound.run(spark, name, resolveOnly, keepIndex = false).rowsResolved == keys.size)
  }

  private def load(name: String) = {
    val table = IcebergSparkTables.load(spark, name)
    table.refresh()
    table
  }

  private def keys(name: String): Set[Long] = {
    spark.conf.set("spark.eqdelete.enabled", "false")
    try spark.table(name).collect().map(_.getLong(0)).toSet finally spark.conf.unset("spark.eqdelete.enabled")
  }

  private def positionDeleteFiles(name: String): Set[String] = {
    val table = load(name)
    LiveDeleteFiles.positionDeletes(table, table.currentSnapshot().snapshotId()).map(_.location()).toSet
  }

  test("each file written is scoped to its data file and carries that file's data sequence number") {
    val name = table(rounds = 3)
    val table0 = load(name)
    val prepared = PositionDeleteCompaction.prepare(spark, table0, threshold = 3).get
    assert(prepared.removed.size == 3 && prepared.added.size == 2)
    prepared.commit(load(name), "test" -> "1")
    val table1 = load(name)
    val dataSequence = table1.newScan().planFiles().asScala.map(t => t.file().location() -> t.file().dataSequenceNumber().longValue()).toMap
    val written = LiveDeleteFiles.positionDeletes(table1, table1.currentSnapshot().snapshotId())
    assert(written.size == 2)
    written.foreach { f =>
      val scopedTo = IcebergInternals.referencedDataFile(f)
      assert(scopedTo.exists(dataSequence.contains), scopedTo)
      assert(f.dataSequenceNumber().longValue() == dataSequence(scopedTo.get))
    }
    assert(keys(name) == (1L to 40L).toSet -- Set(1L, 2L, 3L, 21L, 22L, 23L))
  }

  test("a concurrent commit removing a file the compaction replaces fails its commit; the files it wrote can go") {
    val name = table(rounds = 3)
    val prepared = PositionDeleteCompaction.prepare(spark, load(name), threshold = 3).get
    spark.sql(s"CALL cat.system.rewrite_position_delete_files(table => '${name.stripPrefix("cat.")}', options => map('rewrite-all', 'true'))")
    val before = positionDeleteFiles(name)
    intercept[ValidationException](prepared.commit(load(name), "test" -> "2"))
    prepared.discard()
    prepared.added.foreach(f => assert(!load(name).io().newInputFile(f.location()).exists(), f.location()))
    assert(positionDeleteFiles(name) == before)
    assert(keys(name) == (1L to 40L).toSet -- Set(1L, 2L, 3L, 21L, 22L, 23L))
  }

  test("a resolve committed meanwhile keeps its partition-wide file beside the compaction's") {
    val name = table(rounds = 3)
    val prepared = PositionDeleteCompaction.prepare(spark, load(name), threshold = 3).get
    resolved(name, Seq(10L, 30L))
    val fresh = positionDeleteFiles(name) -- prepared.removed.map(_.location())
    assert(fresh.size == 1)
    prepared.commit(load(name), "test" -> "3")
    assert(positionDeleteFiles(name) == fresh ++ prepared.added.map(_.location()))
    assert(keys(name) == (1L to 40L).toSet -- Set(1L, 2L, 3L, 10L, 21L, 22L, 23L, 30L))
  }

  test("a data file's own files past half the threshold are merged though no new delete names it") {
    val name = table(rounds = 0)
    def compacted(threshold: Long, tag: String): Unit =
      PositionDeleteCompaction.prepare(spark, load(name), threshold).foreach(_.commit(load(name), "test" -> tag))
    // Threshold 4 keeps two files a data file: four rounds, then three more, leave the first data file
    // two own files (4 and 3 positions: the tiers do not merge the 4 into the 3 new ones).
    (1L to 4L).foreach(k => resolved(name, Seq(k)))
    compacted(4, "4a")
    (5L to 7L).foreach(k => resolved(name, Seq(k)))
    compacted(4, "4b")
    val table0 = load(name)
    val own = LiveDeleteFiles.positionDeletes(table0, table0.currentSnapshot().snapshotId())
    assert(own.map(_.recordCount()).sorted == Seq(3L, 4L) && own.forall(f => IcebergInternals.referencedDataFile(f).isDefined))
    // Threshold 2 keeps one: the data file is overfull with no new position, and only its files are merged.
    val plan = PositionDeleteCompaction.plan(table0, table0.currentSnapshot().snapshotId(), threshold = 2).get
    assert(plan.wide.isEmpty && plan.dangling.isEmpty && plan.overfull.size == 1)
    val prepared = PositionDeleteCompaction.prepare(spark, table0, threshold = 2).get
    assert(prepared.removed.size == 2 && prepared.added.size == 1 && prepared.added.head.recordCount() == 7)
    prepared.commit(load(name), "test" -> "2")
    assert(PositionDeletePileUp.mostFilesPerDataFile(load(name), load(name).currentSnapshot().snapshotId()) == 1)
    assert(keys(name) == (8L to 40L).toSet)
    assert(PositionDeleteCompaction.plan(load(name), load(name).currentSnapshot().snapshotId(), threshold = 2).isEmpty)
  }
}
