package eqdelete.maintain

import scala.jdk.CollectionConverters._

import eqdelete.cost.LiveIndexSetting
import eqdelete.testing.{IcebergTables, TestSpark}

import org.apache.spark.sql.eqdelete.compat.IcebergSparkTables
import org.scalatest.funsuite.AnyFunSuite

/**
 * A round of maintain against a commit made between its writing and its commit: a commit
 * rewriting the data files it read (a copy-on-write DELETE here, as a compaction would) conflicts, and the round starts again from the newest snapshot;
 * a writer's new equality deletes do not conflict, and stay live for the next round, counted in
 * the lag. Rows are checked against those written, with eqdelete off. Each case runs twice: rounds
 * run once, and rounds of a long-running maintain through the table's kept index of its live rows.
 */
class MaintainRoundSuite extends AnyFunSuite {

  private lazy val spark = TestSpark.session
  private lazy val tables = new IcebergTables(spark, "maintain")
  private val settings = MaintainRound.Settings(maxAttempts = 3, retryWaitMillis = 1, compactPositionDeleteFiles = 0,
    liveIndex = LiveIndexSetting.Always, liveIndexStores = 2)  // these tables are too small for auto to keep one

  private def how(keep: Boolean): String = if (keep) " (kept index)" else " (once)"

  /** A partitioned table of keys 1..12 whose keys 2, 3 and 8 have equality deletes. */
  private def table(): String = {
    val name = tables.create(partitioned = true)
    tables.insert(name, (1L to 12L).map(k => (k, s"v$k", (k % 2).toInt)))
    tables.deleteKeys(name, Seq((2L, 0), (8L, 0)))
    tables.deleteKeys(name, Seq((3L, 1)))
    name
  }

  private def rows(name: String): Seq[Long] = {
    spark.conf.set("spark.eqdelete.enabled", "false")
    try spark.table(name).collect().map(_.getLong(0)).toSeq.sorted finally spark.conf.unset("spark.eqdelete.enabled")
  }

  private def liveEqualityDeletes(name: String): Long =
    spark.sql(s"SELECT count(*) FROM $name.delete_files WHERE content = 2").collect().head.getLong(0)

  private def currentSnapshot(name: String): Long = {
    val table = IcebergSparkTables.load(spark, name)
    table.refresh()
    table.currentSnapshot().snapshotId()
  }

  /** Every file under the table's location (data, deletes and metadata alike). */
  private def files(name: String): Set[String] = {
    val root = java.nio.file.Paths.get(new java.net.URI(IcebergSparkTables.load(spark, name).location()))
    val walk = java.nio.file.Files.walk(root)
    try walk.iterator().asScala.filter(java.nio.file.Files.isRegularFile(_)).map(_.toString).filter(p => p.contains("/data/")).toSet
    finally walk.close()
  }

  /** Deletes key `k` copy-on-write: its data file is rewritten, so a resolve that read it conflicts. */
  private def rewriteDeleting(name: String, k: Long): Unit = {
    spark.sql(s"ALTER TABLE $name SET TBLPROPERTIES ('write.delete.mode' = 'copy-on-write')")
    spark.sql(s"DELETE FROM $name WHERE k = $k")
  }

  for (keep <- Seq(false, true)) {
    test(s"a commit rewriting a data file between writing and committing conflicts: the round starts over and commits${how(keep)}") {
      val name = table()
      val result = MaintainRound.run(spark, name, settings, keep, attempt => if (attempt == 1) rewriteDeleting(name, 1L))
      assert(result.attempts == 2 && result.conflicts == 1 && result.lastConflict.exists(_.contains("conflicts with a commit")))
      // The index built by the first attempt is the round's news, though a later attempt committed.
      if (keep) assert(result.liveIndexNote.exists(_.contains("built from the table")), result.liveIndexNote)
      // The rewrite dropped key 3's row with its file (p=1): keys 2 and 8 (p=0) are left to resolve.
      assert(result.snapshotId.isDefined && result.rowsResolved == 2 && result.equalityDeleteFilesRemoved == 2)
      assert(rows(name) == ((1L to 12L).toSet -- Set(1L, 2L, 3L, 8L)).toSeq.sorted)
      assert(liveEqualityDeletes(name) == 0 && result.equalityDeleteFilesLive == 0 && result.lagSeconds == 0.0)
    }

    test(s"a round whose every attempt conflicts commits nothing and leaves the table as it was${how(keep)}") {
      val name = table()
      var afterRewrites = -1L
      val result = MaintainRound.run(spark, name, settings.copy(maxAttempts = 2), keep, attempt => {
        rewriteDeleting(name, 10L + attempt)
        afterRewrites = currentSnapshot(name)
      })
      assert(result.attempts == 2 && result.conflicts == 2 && result.snapshotId.isEmpty && result.rowsResolved == 0)
      assert(currentSnapshot(name) == afterRewrites, "the round committed nothing on top of the rewrites")
      assert(result.equalityDeleteFilesLive == liveEqualityDeletes(name))
      assert(rows(name) == ((1L to 10L).toSet -- Set(2L, 3L, 8L)).toSeq.sorted)
      // The next round starts over from the newest snapshot.
      val next = MaintainRound.run(spark, name, settings, keep)
      assert(next.conflicts == 0 && liveEqualityDeletes(name) == 0)
      assert(rows(name) == ((1L to 10L).toSet -- Set(2L, 3L, 8L)).toSeq.sorted)
    }

    test(s"a writer's new equality deletes meanwhile do not conflict; they stay live, counted in the lag, for the next round${how(keep)}") {
      val name = table()
      val result = MaintainRound.run(spark, name, settings, keep, _ => {
        tables.insert(name, Seq((20L, "v20", 0)))
        tables.deleteKeys(name, Seq((4L, 0), (20L, 0)))
      })
      assert(result.attempts == 1 && result.conflicts == 0 && result.rowsResolved == 3)
      assert(result.equalityDeleteFilesLive == 1 && result.lagSeconds >= 0.0 && result.lagSeconds < 600)
      val next = MaintainRound.run(spark, name, settings, keep)
      assert(next.rowsResolved == 2 && next.equalityDeleteFilesLive == 0)
      if (keep) {
        // Built on the first round; the second reads only the writer's new file, and the index holds the live rows.
        assert(result.liveIndexNote.exists(_.contains("built from the table")) && next.liveIndexNote.isEmpty)
        assert(next.dataFilesRead == 1 && next.liveIndexEntries == 8 && next.liveIndexBytes > 0)
      } else assert(next.liveIndexEntries == 0 && next.liveIndexNote.isEmpty)
      assert(rows(name) == ((1L to 12L).toSet -- Set(2L, 3L, 4L, 8L)).toSeq.sorted)
    }

    test(s"a round stopped before its commit commits nothing and deletes what it wrote; stopped at the start, it does nothing${how(keep)}") {
      val name = table()
      val before = currentSnapshot(name)
      val filesBefore = files(name)
      val sc = spark.sparkContext
      sc.setJobGroup("eqdelete-maintain-test", "a round the test stops", interruptOnCancel = true)
      try {
        val stopped = MaintainRound.run(spark, name, settings, keep, _ => assert(RoundStop.stop(sc, "eqdelete-maintain-test")))
        assert(stopped.stoppedAt.contains("resolve: before its commit") && stopped.snapshotId.isEmpty, stopped)
        assert(currentSnapshot(name) == before && files(name) == filesBefore, "a file the round wrote is left")
        assert(stopped.equalityDeleteFilesLive == 2 && liveEqualityDeletes(name) == 2)
        // Stopped as it starts (asked from another thread while the round's first job is under way).
        val asking = new Thread(() => while (!RoundStop.stop(sc, "eqdelete-maintain-test")) Thread.sleep(1))
        asking.start()
        val atOnce = MaintainRound.run(spark, name, settings, keep)
        asking.join()
        assert(atOnce.stoppedAt.exists(_.startsWith("resolve")) && atOnce.snapshotId.isEmpty, atOnce)
        assert(currentSnapshot(name) == before && files(name) == filesBefore)
      } finally sc.clearJobGroup()
      // Not stopped, the next round does the work.
      val next = MaintainRound.run(spark, name, settings, keep)
      assert(next.stoppedAt.isEmpty && next.rowsResolved == 3 && liveEqualityDeletes(name) == 0)
      assert(rows(name) == ((1L to 12L).toSet -- Set(2L, 3L, 8L)).toSeq.sorted)
    }

    test(s"position delete files piling up in a partition are compacted once they reach the setting${how(keep)}") {
      val name = table()
      val compacting = settings.copy(compactPositionDeleteFiles = 2)
      val first = MaintainRound.run(spark, name, compacting, keep)
      assert(first.positionDeleteFilesWritten == 2 && first.positionDeleteFilesCompacted == 0)
      tables.deleteKeys(name, Seq((6L, 0), (5L, 1)))
      val second = MaintainRound.run(spark, name, compacting, keep)
      // Each partition held two position delete files after the second resolve: both rewritten into one.
      assert(second.rowsResolved == 2 && second.positionDeleteFilesCompacted == 4 && second.compactionFilesWritten == 2)
      val perPartition = spark.sql(s"SELECT partition.p, count(*) FROM $name.delete_files WHERE content = 1 GROUP BY 1")
        .collect().map(r => r.getInt(0) -> r.getLong(1)).toMap
      assert(perPartition == Map(0 -> 1L, 1 -> 1L))
      assert(rows(name) == ((1L to 12L).toSet -- Set(2L, 3L, 5L, 6L, 8L)).toSeq.sorted)
    }
  }
}
