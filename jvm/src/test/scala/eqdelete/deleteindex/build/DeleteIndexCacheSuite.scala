package eqdelete.deleteindex.build

import java.nio.file.{Files, Paths, StandardOpenOption}

import eqdelete.cost.{CostModel, CostSettings, IndexKind, ScanRewritePlan, Strategy, StrategySetting}
import eqdelete.deleteindex.DeleteKeyIndex
import eqdelete.planning.DeletePlanner
import eqdelete.read.DeleteFileReadException
import eqdelete.testing.{IcebergTables, TestSpark}

import org.apache.spark.sql.eqdelete.compat.IcebergSparkTables
import org.scalatest.funsuite.AnyFunSuite

/** The filter's index cache: what makes two indexes the same, and what a hit still checks. */
class DeleteIndexCacheSuite extends AnyFunSuite {

  private lazy val spark = TestSpark.session
  private lazy val tables = new IcebergTables(spark, "cache")

  private val settings = CostSettings(StrategySetting.Forced(Strategy.Filter), minDataRows = 0, filterMaxDeleteRows = 1000000,
    broadcastMaxBytes = 1L << 20, maxHeapFraction = 0.25, filterForce = true, driverHeapBytes = 1L << 30, parallelism = 2)

  /** The index source of `table`'s one equality set, as the rule would plan it now. */
  private def source(table: String): DeleteKeyIndexSource = {
    val iceberg = IcebergSparkTables.load(spark, table)
    iceberg.refresh()
    val deletes = DeletePlanner.plan(iceberg, iceberg.currentSnapshot().snapshotId(), iceberg.schema()).get
    val indexed = CostModel.plan(deletes, iceberg.schema(), settings) match {
      case filter: ScanRewritePlan.Filter => filter.indexes.head
      case other => fail(s"planned $other")
    }
    DeleteKeyIndexSource(indexed, iceberg.io(), iceberg.schema())
  }

  private def build(source: DeleteKeyIndexSource): DeleteIndexCache.BuiltIndex =
    DeleteIndexCache.getOrBuild(spark.sparkContext, spark.sessionState.conf, source)

  private def withDeletes(body: String => Unit): Unit = {
    val table = tables.create()
    tables.insert(table, (1L to 10L).map(k => (k, s"v$k", 0)))
    tables.deleteKeys(table, Seq((2L, 0), (3L, 0)))
    body(table)
  }

  private def deleteFilePath(source: DeleteKeyIndexSource) =
    Paths.get(new java.net.URI(source.indexed.set.files.head.file.location()))

  test("the same delete files, scopes, sequence numbers and index kind give the cached index; a new delete file another") {
    withDeletes { table =>
      assert(source(table).indexed.kind.isInstanceOf[IndexKind.KeyBitmap]) // every data file older than the deletes
      val bitmap = build(source(table))
      assert(build(source(table)).index eq bitmap.index)
      // A data commit: the same delete files, but a data file as new as them, so the index needs
      // sequence numbers: the table, never the bitmap from the cache.
      tables.insert(table, Seq((11L, "v11", 0)))
      assert(source(table).indexed.kind == IndexKind.Table)
      val first = build(source(table))
      assert(!(first.index eq bitmap.index))
      tables.insert(table, Seq((12L, "v12", 0)))                  // another data commit: the same table
      assert(build(source(table)).index eq first.index)
      tables.deleteKeys(table, Seq((11L, 0)))
      val second = build(source(table))
      assert(!(second.index eq first.index))
      assert(second.index.value.newestOf(0L, Array[Any](11L)) != DeleteKeyIndex.NoDelete)
    }
  }

  test("an index over spark.eqdelete.filter.cacheMaxKeys keys is built, not kept") {
    withDeletes { table =>
      spark.conf.set("spark.eqdelete.filter.cacheMaxKeys", "1")
      try {
        val first = build(source(table))
        assert(!(build(source(table)).index eq first.index))
      } finally spark.conf.unset("spark.eqdelete.filter.cacheMaxKeys")
    }
  }

  test("an index past spark.eqdelete.filter.cacheMaxKeys evicts the least recently used ones, which are built again") {
    val (first, second) = (tables.create(), tables.create())
    Seq(first, second).foreach { table =>
      tables.insert(table, (1L to 10L).map(k => (k, s"v$k", 0)))
      tables.deleteKeys(table, Seq((2L, 0), (3L, 0)))
    }
    spark.conf.set("spark.eqdelete.filter.cacheMaxKeys", "3")  // room for one index of 2 keys
    try {
      val kept = build(source(first))
      assert(build(source(first)).kept)
      val other = build(source(second))                         // evicts the first table's index
      assert(build(source(second)).index eq other.index)
      val again = build(source(first))
      assert(!again.kept && !(again.index eq kept.index))
    } finally spark.conf.unset("spark.eqdelete.filter.cacheMaxKeys")
  }

  test("a hit fails the query when a delete file is gone, has another size, or is no longer Parquet") {
    withDeletes { table =>
      val planned = source(table)
      build(planned)
      val path = deleteFilePath(planned)
      val original = Files.readAllBytes(path)
      val bytes = original.clone()
      // Hadoop's local file system checks a .crc beside each file; object stores have none.
      Files.deleteIfExists(path.resolveSibling(s".${path.getFileName}.crc"))

      bytes(bytes.length - 1) = 'X'.toByte                         // same size, no Parquet magic at the end
      Files.write(path, bytes)
      assert(intercept[DeleteFileReadException](build(planned)).getMessage.contains("not a PARQUET file"))

      Files.write(path, bytes.take(bytes.length - 8))
      assert(intercept[DeleteFileReadException](build(planned)).getMessage.contains("bytes"))

      Files.delete(path)
      assert(intercept[DeleteFileReadException](build(planned)).getMessage.contains(path.getFileName.toString))
      Files.write(path, original, StandardOpenOption.CREATE_NEW)
    }
  }

  test("a hit checks every file of a set of many, and names the one that is gone") {
    val table = tables.create()
    tables.insert(table, (1L to 40L).map(k => (k, s"v$k", 0)))
    (2L to 38L by 4L).foreach(k => tables.deleteKeys(table, Seq((k, 0))))   // ten delete files, one set
    val planned = source(table)
    assert(planned.indexed.set.files.size == 10)
    val built = build(planned)
    assert(build(planned).index eq built.index)
    val gone = Paths.get(new java.net.URI(planned.indexed.set.files(6).file.location()))
    val original = Files.readAllBytes(gone)
    Files.delete(gone)
    val error = intercept[DeleteFileReadException](build(planned))
    assert(error.getMessage.contains(gone.getFileName.toString), error.getMessage)
    Files.write(gone, original, StandardOpenOption.CREATE_NEW)
    assert(build(planned).index eq built.index)
  }

  test("the index's plan node is shipped without its delete files (read tasks deserialize the plan above it)") {
    def shipped(deleteFiles: Int): (Int, Int) = {
      val table = tables.create()
      tables.insert(table, (1L to 40L).map(k => (k, s"v$k", 0)))
      (1 to deleteFiles).foreach(i => tables.deleteKeys(table, Seq((i.toLong, 0))))
      val planned = source(table)
      val node = BuildDeleteKeyIndexExec(planned, BuildDeleteKeyIndex(planned).output)
      def size(o: AnyRef) = {
        val bytes = new java.io.ByteArrayOutputStream()
        val out = new java.io.ObjectOutputStream(bytes)
        out.writeObject(o)
        out.close()
        bytes.size()
      }
      (size(node), size(planned.indexed.set.files.map(_.file).toArray))
    }
    val (one, oneFiles) = shipped(1)
    val (twenty, twentyFiles) = shipped(20)
    assert(twentyFiles > oneFiles + 5000, s"$oneFiles and $twentyFiles bytes of delete files")
    assert(twenty == one, s"$one bytes with one delete file, $twenty with twenty")
  }
}
