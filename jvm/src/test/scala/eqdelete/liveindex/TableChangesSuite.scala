package eqdelete.liveindex

import scala.jdk.CollectionConverters._

import eqdelete.testing.{IcebergTables, TestSpark}

import org.apache.iceberg.Table
import org.apache.spark.sql.eqdelete.compat.{IcebergInternals, IcebergSparkTables}
import org.scalatest.funsuite.AnyFunSuite

/** The changes between snapshots, against the table's own file listings, through Iceberg's own operations. */
class TableChangesSuite extends AnyFunSuite {
  private val spark = TestSpark.session
  private val tables = new IcebergTables(spark, "changes")

  private def load(name: String): Table = IcebergSparkTables.current(spark, name)

  private def dataFiles(table: Table, snapshot: Long): Set[String] =
    table.newScan().useSnapshot(snapshot).planFiles().asScala.map(_.file().location()).toSet

  private def head(table: Table): Long = table.currentSnapshot().snapshotId()

  test("appends, a merge-on-read delete, compactions of data and of position deletes, walked from an older snapshot") {
    val name = tables.create()
    spark.sql(s"ALTER TABLE $name SET TBLPROPERTIES ('write.delete.mode'='merge-on-read')")
    tables.insert(name, (0L until 20L).map(k => (k, s"v$k", (k % 2).toInt)))
    val start = head(load(name))
    tables.insert(name, (20L until 30L).map(k => (k, s"v$k", 0)))
    spark.sql(s"DELETE FROM $name WHERE k = 3")  // a position delete on a file of the start
    val beforeCompaction = load(name)
    val atDelete = head(beforeCompaction)
    val deleted = TableChanges.between(beforeCompaction, start, atDelete, _ => false).get
    assert(deleted.snapshots == beforeCompaction.snapshots().asScala.map(_.snapshotId()).toSeq.drop(1))
    // The delete names the row in a data file of the start.
    val target = deleted.positionDeletes.flatMap(d => IcebergInternals.positionDeleteTargets(beforeCompaction.io(), d)).toSet
    assert(deleted.positionDeletes.size == 1 && target.size == 1 && target.subsetOf(dataFiles(beforeCompaction, start)))
    assert(TableChanges.between(beforeCompaction, atDelete, atDelete, _ => false).contains(TableChanges(Nil, Nil)))

    spark.sql(s"CALL cat.system.rewrite_position_delete_files(table => '${name.stripPrefix("cat.")}', options => map('rewrite-all', 'true'))")
    spark.sql(s"CALL cat.system.rewrite_data_files(table => '${name.stripPrefix("cat.")}', options => map('rewrite-all', 'true'))")
    val table = load(name)
    val now = head(table)
    val changes = TableChanges.between(table, start, now, _ => false).get
    // The compactions are replacements (no row changes); the delete's file still counts.
    assert(changes.positionDeletes.size == 1 && changes.snapshots.size == 4)
    // A snapshot marked as the index's own is skipped for its deletes.
    assert(TableChanges.between(table, start, now, s => s.snapshotId() == atDelete).get.positionDeletes.isEmpty)
  }

  test("no changes to walk when the older snapshot is not an ancestor, or a snapshot between has expired") {
    val name = tables.create()
    tables.insert(name, Seq((1L, "a", 0)))
    val first = head(load(name))
    tables.insert(name, Seq((2L, "b", 0)))
    val second = head(load(name))
    spark.sql(s"CALL cat.system.rollback_to_snapshot('${name.stripPrefix("cat.")}', $first)")
    tables.insert(name, Seq((3L, "c", 0)))
    val branched = load(name)  // the catalog's own object: ids are taken as values
    val third = head(branched)
    assert(TableChanges.between(branched, second, third, _ => false).isEmpty, "second is not an ancestor")
    assert(TableChanges.between(branched, first, third, _ => false).get.snapshots == Seq(third))

    tables.insert(name, Seq((4L, "d", 0)))
    load(name).expireSnapshots().expireSnapshotId(third).commit()
    assert(TableChanges.between(load(name), first, head(load(name)), _ => false).isEmpty, "a snapshot between expired")
  }
}
