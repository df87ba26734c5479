package eqdelete.planning

import scala.jdk.CollectionConverters._

import eqdelete.testing.TestSpark
import eqdelete.write.EqualityDeleteWriter

import org.apache.iceberg.Table
import org.apache.spark.sql.DataFrame
import org.apache.spark.sql.eqdelete.compat.IcebergSparkTables
import org.apache.spark.unsafe.types.UTF8String
import org.scalatest.funsuite.AnyFunSuite

/**
 * The planned deletes against Iceberg's own metadata: scopes, sequence numbers, counts, delete sets,
 * the NaN case Iceberg's pairing overlooks, and the reads it declines.
 */
class DeletePlannerSuite extends AnyFunSuite {

  private lazy val spark = TestSpark.session
  private var tables = 0

  private def create(columns: String, partitionedBy: String = ""): String = {
    tables += 1
    val name = s"cat.planner.t$tables"
    spark.sql("CREATE NAMESPACE IF NOT EXISTS cat.planner")
    spark.sql(s"CREATE TABLE $name ($columns) USING iceberg $partitionedBy TBLPROPERTIES ('format-version'='2')")
    name
  }

  /** The rows of `sql` (a VALUES list), written by one task: one data file per partition. */
  private def append(name: String, sql: String): Unit =
    spark.sql(s"INSERT INTO $name SELECT /*+ COALESCE(1) */ * FROM $sql")

  /** One delete file per partition. */
  private def deleteKeys(name: String, keys: Seq[String], rows: DataFrame, global: Boolean = false): Unit =
    EqualityDeleteWriter.commit(spark, name, keys.asJava, rows.coalesce(1), null, global)

  private def icebergTable(name: String): Table = IcebergSparkTables.current(spark, name)

  private def planOf(name: String): Option[ScanDeletes] = {
    val table = icebergTable(name)
    DeletePlanner.plan(table, table.currentSnapshot().snapshotId(), table.schema())
  }

  private def path(p: String) = UTF8String.fromString(p)

  test("no plan where no planned file carries an equality delete") {
    val name = create("k BIGINT, v STRING")
    append(name, "VALUES (1, 'a'), (2, 'b')")
    assert(planOf(name).isEmpty)
  }

  test("an unpartitioned table: a global delete newer than the files before it, counted per file") {
    val name = create("k BIGINT, v STRING")
    append(name, "VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    deleteKeys(name, Seq("k"), spark.sql("SELECT 2L AS k"))
    append(name, "VALUES (4, 'd')") // newer than the delete: it carries none
    val plan = planOf(name).get
    assert(plan.dataFiles == 2 && plan.dataFilesWithDeletes == 1 && plan.dataFilesWithoutDeletes == 1)
    assert(plan.rowsWithDeletes == 3 && plan.rowsWithoutDeletes == 1)
    val Seq(set) = plan.deleteSets
    assert(set.keyPaths == Seq(Seq("k")) && set.records == 1)
    val Seq(ref) = set.files
    assert(ref.isGlobal)
    val sequences = plan.scan.tasks.map(t => plan.dataFileScopes.sequenceNumber(path(t.file().location())))
    assert(sequences.count(_ < ref.sequenceNumber) == 1 && sequences.count(_ > ref.sequenceNumber) == 1)
    assert(plan.assignmentMayMiss.isEmpty)
  }

  test("a partitioned table: each delete scoped to its partition, files of other partitions without deletes") {
    val name = create("k BIGINT, p INT", "PARTITIONED BY (p)")
    append(name, "VALUES (1, 0), (2, 0), (3, 1), (4, 1), (5, 2)")
    deleteKeys(name, Seq("k"), spark.sql("SELECT 1L AS k, 0 AS p UNION ALL SELECT 4L, 1"))
    val plan = planOf(name).get
    assert(plan.dataFiles == 3 && plan.dataFilesWithDeletes == 2)
    val refs = plan.deleteSets.flatMap(_.files)
    assert(refs.size == 2 && refs.forall(!_.isGlobal) && refs.map(_.scope).distinct.size == 2)
    val scopeOfPartition = plan.scan.tasks.map { t =>
      t.file().partition().get(0, classOf[Integer]).intValue -> plan.dataFileScopes.scope(path(t.file().location()))
    }.toMap
    refs.foreach { ref =>
      val partition = ref.file.partition().get(0, classOf[Integer]).intValue
      assert(scopeOfPartition(partition) == ref.scope, s"delete of partition $partition")
    }
    assert(!refs.map(_.scope.toLong).contains(scopeOfPartition(2)))
  }

  test("delete files group into one set per equality_ids, each with its key columns") {
    val name = create("a BIGINT, b STRING, s STRUCT<x: INT>")
    append(name, "VALUES (1, 'x', named_struct('x', 1)), (2, 'y', named_struct('x', 2))")
    deleteKeys(name, Seq("a"), spark.sql("SELECT 1L AS a"))
    deleteKeys(name, Seq("b", "s.x"), spark.sql("SELECT 'y' AS b, named_struct('x', 2) AS s"))
    deleteKeys(name, Seq("a"), spark.sql("SELECT 2L AS a"))
    val sets = planOf(name).get.deleteSets
    assert(sets.map(_.keyColumns).toSet == Set(Seq("a"), Seq("b", "s.x")))
    assert(sets.find(_.keyColumns == Seq("a")).get.files.size == 2)
    assert(sets.find(_.keyColumns == Seq("b", "s.x")).get.keyPaths == Seq(Seq("b"), Seq("s", "x")))
  }

  test("a NaN delete Iceberg's pairing by bounds leaves out is in the plan, which says every file needs it") {
    val name = create("d DOUBLE, v STRING")
    append(name, "VALUES (CAST('NaN' AS DOUBLE), 'nan'), (1.0, 'one')")
    append(name, "VALUES (100.0, 'hundred')")
    deleteKeys(name, Seq("d"), spark.sql("SELECT CAST('NaN' AS DOUBLE) AS d UNION ALL SELECT 100.0D"))
    val plan = planOf(name).get
    // Iceberg pairs the delete (bounds 100..100) with the second file only, not the NaN row's.
    assert(plan.dataFiles == 2 && plan.dataFilesWithDeletes == 1)
    assert(plan.assignmentMayMiss.exists(_.contains("NaN")), plan.assignmentMayMiss)
    assert(plan.deleteSets.flatMap(_.files).size == 1)
  }

  test("a read without the key column is declined, naming the field") {
    val name = create("k BIGINT, v STRING")
    append(name, "VALUES (1, 'a')")
    deleteKeys(name, Seq("k"), spark.sql("SELECT 1L AS k"))
    val table = icebergTable(name)
    val error = intercept[DeclinedException] {
      DeletePlanner.plan(table, table.currentSnapshot().snapshotId(), table.schema().select("v"))
    }
    assert(error.reason.contains("is not a column of the schema read"), error.reason)
  }

  test("the planned tasks serve the same snapshot, case sensitivity and conjuncts in any order, nothing else") {
    import org.apache.iceberg.expressions.Expressions._
    val name = create("k BIGINT, v STRING")
    append(name, "VALUES (1, 'a')")
    deleteKeys(name, Seq("k"), spark.sql("SELECT 1L AS k"))
    val table = icebergTable(name)
    val snapshot = table.currentSnapshot().snapshotId()
    val filter = and(greaterThan("k", 0L), equal("v", "a"))
    val scan = DeletePlanner.plan(table, snapshot, table.schema(), filter).get.scan
    assert(scan.serves(snapshot, and(equal("v", "a"), greaterThan("k", 0L)), isCaseSensitive = false))
    assert(scan.serves(snapshot, and(alwaysTrue(), and(equal("v", "a"), greaterThan("k", 0L))), isCaseSensitive = false))
    assert(!scan.serves(snapshot, greaterThan("k", 0L), isCaseSensitive = false))
    assert(!scan.serves(snapshot, and(filter, lessThan("k", 9L)), isCaseSensitive = false))
    assert(!scan.serves(snapshot, filter, isCaseSensitive = true))
    assert(!scan.serves(snapshot + 1, filter, isCaseSensitive = false))
    assert(!scan.serves(snapshot, equal("missing", 1), isCaseSensitive = false)) // cannot bind: plan again
  }

  test("a read of the files a snapshot added is planned from its own manifests, as Iceberg plans them") {
    import org.apache.iceberg.expressions.Expressions._
    val name = create("k BIGINT, p INT", "PARTITIONED BY (p)")
    append(name, "VALUES (1, 0), (2, 0), (3, 1)")
    // An upsert: the deletes and the new rows in one commit, at one sequence number.
    EqualityDeleteWriter.commit(spark, name, Seq("k").asJava, spark.sql("SELECT 1L AS k, 0 AS p UNION ALL SELECT 3L, 1"),
      spark.sql("SELECT * FROM VALUES (1L, 0), (3L, 1), (4L, 2) AS t(k, p)").coalesce(1), false)
    val table = icebergTable(name)
    val snapshot = table.currentSnapshot()
    val added = snapshot.addedDataFiles(table.io()).asScala.map(_.location()).toSet
    val older = table.newScan().planFiles().asScala.map(_.file().location()).toSet -- added
    assert(added.size == 3 && older.size == 2)
    def tasksOf(tasks: Seq[org.apache.iceberg.FileScanTask]) =
      tasks.map(t => t.file().location() -> t.deletes().asScala.map(_.location()).toSet).toMap
    for (filter <- Seq(alwaysTrue(), equal("p", 2), greaterThan("k", 3L))) {
      val (tasks, deletes) = DeletePlanner.planned(table, snapshot.snapshotId(), table.schema(), filter, onlyFiles = Some(added))
      assert(deletes.isEmpty, "no equality delete applies to the rows of its own commit")
      assert(tasks.reports.isEmpty, "planned from the snapshot's manifests, not by Iceberg's scan")
      // What Iceberg's planning of the whole snapshot gives those files: the same files, pruned alike, no deletes.
      val whole = scala.util.Using.resource(table.newScan().useSnapshot(snapshot.snapshotId()).filter(filter).planFiles())(
        _.asScala.filter(t => added(t.file().location())).toVector)
      assert(tasksOf(tasks.tasks) == tasksOf(whole), filter)
      assert(whole.nonEmpty)
    }
    // Files the snapshot did not add, or not all of them its own: Iceberg's plan of the whole snapshot.
    for (files <- Seq(older, added ++ older.take(1))) {
      val (tasks, _) = DeletePlanner.planned(table, snapshot.snapshotId(), table.schema(), onlyFiles = Some(files))
      assert(tasks.reports.nonEmpty && tasks.tasks.map(_.file().location()).toSet == files)
    }
    assert(AddedFileTasks.of(table, snapshot.parentId(), added, alwaysTrue(), caseSensitive = false).isEmpty)
  }
}
