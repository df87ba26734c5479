package eqdelete.changes

import scala.jdk.CollectionConverters._

import eqdelete.testing.{IcebergTables, TestSpark}

import org.apache.iceberg.Table
import org.apache.spark.sql.eqdelete.compat.IcebergSparkTables
import org.scalatest.funsuite.AnyFunSuite

/** Which files a snapshot's changes read, against the files its equality deletes can match. */
class SnapshotChangeFilesSuite extends AnyFunSuite {
  private val spark = TestSpark.session
  private val tables = new IcebergTables(spark, "changefiles")

  private def load(name: String): Table = IcebergSparkTables.current(spark, name)

  /** The data file holding key `k`. */
  private def fileOf(table: Table, k: String): String =
    spark.sql(s"SELECT _file FROM ${table.name()} WHERE k $k").collect().map(_.getString(0)).distinct.toSeq match {
      case Seq(file) => file
      case files => fail(s"key $k is in ${files.size} files")
    }

  test("an equality delete touches only the files whose key bounds, or NULLs, it can match") {
    import spark.implicits._
    val name = tables.create()
    tables.insert(name, (0L until 10L).map(k => (k, s"a$k", 0)))
    tables.insert(name, (100L until 110L).map(k => (k, s"b$k", 0)))
    Seq((Option.empty[Long], "null", 0), (Some(200L), "c200", 0)).toDF("k", "v", "p").writeTo(name).append()
    val table = load(name)
    val (low, high, withNull) = (fileOf(table, "= 5"), fileOf(table, "= 105"), fileOf(table, "IS NULL"))

    tables.deleteKeys(name, Seq((105L, 0)))
    val byBounds = SnapshotChangeFiles.of(load(name), load(name).currentSnapshot())
    assert(byBounds.unchanged.isEmpty && byBounds.added.isEmpty)
    assert(byBounds.touched == Set(high), "only the file whose range holds 105")

    tables.delete(name, Seq("k"), Seq((Option.empty[Long], 0)).toDF("k", "p"))
    assert(SnapshotChangeFiles.of(load(name), load(name).currentSnapshot()).touched == Set(withNull),
      "a NULL key: only the file holding NULLs")

    tables.deleteKeys(name, Seq((5L, 0), (150L, 0)))
    assert(SnapshotChangeFiles.of(load(name), load(name).currentSnapshot()).touched == Set(low, high),
      "keys 5 to 150: the ranges 0-9 and 100-109, not the file of NULL and 200")
    assert(spark.table(name).count() == 22 - 3)
  }

  test("a replace and eqdelete's resolve change no row and read nothing") {
    val name = tables.create()
    tables.insert(name, (0L until 10L).map(k => (k, s"a$k", 0)))
    tables.deleteKeys(name, Seq((3L, 0)))
    eqdelete.resolve.ResolveEqualityDeletes.run(spark, name, null, false)
    val resolved = SnapshotChangeFiles.of(load(name), load(name).currentSnapshot())
    assert(resolved.unchanged.exists(_.contains("resolve")) && resolved.touched.isEmpty && resolved.added.isEmpty)
    spark.sql(s"CALL cat.system.rewrite_data_files(table => '${name.stripPrefix("cat.")}', options => map('rewrite-all', 'true'))")
    val compacted = SnapshotChangeFiles.of(load(name), load(name).currentSnapshot())
    assert(compacted.unchanged.exists(_.contains("replace")), compacted)
    assert(load(name).snapshots().asScala.size == 4)
  }

  test("a rewrite that kept its start's sequence number, racing a partition-scoped upsert across a spec change, is read") {
    import spark.implicits._
    // Rows written unpartitioned; then partitioned by p. A rewrite starts (it reads the rows and
    // writes them under the new spec), an upsert of key 1 commits its delete under the new spec,
    // and the rewrite commits with its start's sequence number: the upsert's delete missed the
    // original (another spec) but applies to the rewritten row, so the rewrite deletes it.
    val name = tables.create()
    tables.insert(name, Seq((1L, "a", 0), (2L, "a", 0)))
    spark.sql(s"ALTER TABLE $name ADD PARTITION FIELD p")
    val start = load(name).currentSnapshot()
    val original = start.addedDataFiles(load(name).io()).asScala.toSeq
    val rewritten = eqdelete.write.EqualityDeleteWriter.dataFilesOf(load(name),
      spark.sql(s"SELECT * FROM $name VERSION AS OF ${start.snapshotId()}"))
    eqdelete.write.EqualityDeleteWriter.commit(spark, name, Seq("k").asJava, Seq((1L, 0)).toDF("k", "p"),
      Seq((1L, "b", 0)).toDF("k", "v", "p"), false)
    val upserted = load(name).currentSnapshot().snapshotId()
    val rewrite = load(name).newRewrite().validateFromSnapshot(start.snapshotId()).dataSequenceNumber(start.sequenceNumber())
    original.foreach(rewrite.deleteFile)
    rewritten.foreach(rewrite.addFile)
    rewrite.commit()
    val replaced = load(name).currentSnapshot()
    assert(replaced.operation() == "replace")
    def rows(snapshot: Long) = spark.sql(s"SELECT k, v FROM $name VERSION AS OF $snapshot").as[(Long, String)].collect().sorted.toSeq
    assert(rows(upserted) == Seq((1L, "a"), (1L, "b"), (2L, "a")), "the upsert's delete, in the new spec, missed the original")
    assert(rows(replaced.snapshotId()) == Seq((1L, "b"), (2L, "a")), "and applies to the rewritten row")

    val files = SnapshotChangeFiles.of(load(name), replaced)
    assert(files.unchanged.isEmpty && files.touched == original.map(_.location()).toSet, files)
    val changes = ChangesPlan.of(spark, name, ChangesOptions(startSnapshotId = Some(upserted)))
      .select("k", "v", ChangesPlan.ChangeType).as[(Long, String, String)].collect().toSeq
    assert(changes == Seq((1L, "a", ChangesPlan.Delete)), changes)

    // A rewrite with no delete committed while it ran changes nothing, and is not read.
    spark.sql(s"CALL cat.system.rewrite_data_files(table => '${name.stripPrefix("cat.")}', options => map('rewrite-all', 'true'))")
    assert(SnapshotChangeFiles.of(load(name), load(name).currentSnapshot()).unchanged.exists(_.contains("replace")))
  }

  test("a snapshot whose equality deletes alone change its parent's files names them; a position delete on one does not") {
    val name = tables.create()
    tables.insert(name, (0L until 10L).map(k => (k, s"a$k", 0)))
    tables.deleteKeys(name, Seq((3L, 0), (4L, 0)))
    val keyed = SnapshotChangeFiles.of(load(name), load(name).currentSnapshot())
    val k = load(name).schema().findField("k").fieldId()
    assert(keyed.byKeys.map(_.equalityIds).contains(Seq(k)) && keyed.byKeys.exists(_.records == 2), keyed)

    spark.sql(s"ALTER TABLE $name SET TBLPROPERTIES ('write.delete.mode'='merge-on-read')")
    spark.sql(s"DELETE FROM $name WHERE k = 5")
    val positional = SnapshotChangeFiles.of(load(name), load(name).currentSnapshot())
    assert(positional.touched.size == 1 && positional.byKeys.isEmpty, positional)
    assert(spark.table(name).count() == 7)
  }

  test("a snapshot's live data files, brought forward from its parent's by its own manifests, are Iceberg's plan of it") {
    val name = tables.create(partitioned = true)
    tables.insert(name, (0L until 10L).map(k => (k, s"a$k", (k % 3).toInt)))
    tables.insert(name, (10L until 20L).map(k => (k, s"b$k", (k % 3).toInt)))
    tables.deleteKeys(name, Seq((5L, 2), (12L, 0)))
    spark.sql(s"CALL cat.system.rewrite_data_files(table => '$name', options => map('min-input-files', '1'))")
    spark.sql(s"DELETE FROM $name WHERE p = 1")  // whole files removed
    tables.insert(name, Seq((30L, "c30", 1)))
    val table = load(name)
    val oldestFirst = Iterator.iterate(Option(table.currentSnapshot()))(_.flatMap(s => Option(s.parentId()).map(id => table.snapshot(id))))
      .takeWhile(_.isDefined).flatten.toVector.reverse
    assert(oldestFirst.size == 6)
    val key = table.schema().findField("k").fieldId()
    oldestFirst.foreach { s =>
      val planned = scala.util.Using.resource(table.newScan().useSnapshot(s.snapshotId()).planFiles())(
        _.asScala.map(_.file().location()).toSet)
      val live = LiveDataFiles.at(table, s.snapshotId(), Set(key))
      assert(live.map(_.location()).toSet == planned && live.size == planned.size, s"snapshot ${s.snapshotId()} (${s.operation()})")
      assert(live.forall(f => f.lowerBounds().keySet().asScala == Set(Integer.valueOf(key)) && f.dataSequenceNumber() != null),
        "with the key's stats alone, and their sequence numbers")
    }
    // Brought forward over several commits at once (those between changed no parent files asked for).
    LiveDataFiles.at(table, oldestFirst(1).snapshotId(), Set(key))
    val current = scala.util.Using.resource(table.newScan().planFiles())(_.asScala.map(_.file().location()).toSet)
    assert(LiveDataFiles.at(table, table.currentSnapshot().snapshotId(), Set(key)).map(_.location()).toSet == current)
  }
}
