package eqdelete.cost

import scala.jdk.CollectionConverters._

import eqdelete.planning.{DataFileScopes, ScanDeletes, EqualityDeleteRef, EqualityDeleteSet, PlannedTasks}

import org.apache.iceberg.{FileFormat, FileMetadata, Metrics, PartitionSpec, Schema}
import org.apache.iceberg.expressions.Expressions
import org.apache.iceberg.types.{Conversions, Types}
import org.scalatest.funsuite.AnyFunSuite

/** The cost model, table-driven: metadata and settings in, one typed plan out. */
class CostModelSuite extends AnyFunSuite {

  private val schema = new Schema(
    Types.NestedField.optional(1, "id", Types.LongType.get()),
    Types.NestedField.optional(2, "name", Types.StringType.get()))

  private var files = 0
  private def deleteFile(records: Long, scope: Int, seq: Long = 5, ids: Seq[Int] = Seq(1), nulls: Long = 0,
      bounds: Option[(Long, Long)] = None): EqualityDeleteRef = {
    files += 1
    val counts = ids.map(id => Integer.valueOf(id) -> java.lang.Long.valueOf(nulls)).toMap.asJava
    def bound(value: Long) = Map(Integer.valueOf(ids.head) -> Conversions.toByteBuffer(Types.LongType.get(), value)).asJava
    val metrics = bounds match {
      case Some((lower, upper)) => new Metrics(records, null, null, counts, null, bound(lower), bound(upper))
      case None => new Metrics(records, null, null, counts, null)
    }
    val file = FileMetadata.deleteFileBuilder(PartitionSpec.unpartitioned())
      .ofEqualityDeletes(ids: _*)
      .withPath(s"/deletes/$files.parquet")
      .withFormat(FileFormat.PARQUET)
      .withFileSizeInBytes(1024)
      .withMetrics(metrics)
      .build()
    EqualityDeleteRef(file, scope, seq)
  }

  private def scanDeletes(refs: Seq[EqualityDeleteRef], rowsWith: Long = 1000000, rowsWithout: Long = 0,
      filesWithout: Int = 0, newestData: Long = 1): ScanDeletes = {
    val dataFiles = (0 until 4 + filesWithout).map(i => s"/data/$i.parquet" -> (if (i == 0) newestData else 1L, 0)).toMap
    val sets = refs.groupBy(_.file.equalityFieldIds().asScala.map(_.intValue).toVector).toVector.sortBy(_._1.mkString(","))
      .map { case (ids, rs) => EqualityDeleteSet(ids, ids.map(id => Seq(schema.findColumnName(id))), rs) }
    ScanDeletes(1L, new DataFileScopes(dataFiles), 4, rowsWith, rowsWithout, sets,
      PlannedTasks(1L, schema, Expressions.alwaysTrue(), caseSensitive = false, Vector.empty))
  }

  private val GB = 1L << 30
  private def settings(strategy: String = "auto", heap: Long = 4 * GB, broadcast: Long = 256L << 20,
      force: Boolean = false, parallelism: Int = 2) =
    CostSettings(StrategySetting.parse(strategy), minDataRows = 200000, filterMaxDeleteRows = 2000000, broadcastMaxBytes = broadcast,
      maxHeapFraction = 0.25, filterForce = force, driverHeapBytes = heap, parallelism = parallelism)

  private def strategyOf(plan: ScanRewritePlan): String = plan.strategy.name
  private def sides(plan: ScanRewritePlan): Seq[(Boolean, JoinDistribution)] = plan match {
    case join: ScanRewritePlan.Join => join.joins.map(j => (j.byScope, j.distribution))
    case _ => Nil
  }

  test("the strategy setting parses every value its declaration accepts, and names each strategy as the setting does") {
    val declared = org.apache.spark.sql.eqdelete.compat.EqDeleteConf.Strategy.all
    assert(declared.toSet == Strategy.all.map(_.name).toSet + "auto")
    assert(StrategySetting.parse("auto") == StrategySetting.Auto)
    assert(StrategySetting.parse("filter") == StrategySetting.Forced(Strategy.Filter))
    assert(StrategySetting.parse("join") == StrategySetting.Forced(Strategy.Join))
    assert(StrategySetting.parse("native") == StrategySetting.Forced(Strategy.Native))
    val error = intercept[IllegalArgumentException](StrategySetting.parse("broadcast"))
    assert(error.getMessage.contains("'broadcast'") && error.getMessage.contains("auto, filter, join, native"))
  }

  test("the strategy, table-driven") {
    // (case, delete rows, rows in files with deletes, settings, expected strategy, reason contains)
    val cases = Seq(
      ("auto, small scan", 1000L, 1000L, settings(), "native", "auto.minDataRows"),
      ("auto, few deletes", 1000L, 1000000L, settings(), "filter", "auto.filterMaxDeleteRows"),
      ("auto, many deletes", 3000000L, 10000000L, settings(), "join", "3000000 delete rows >"),
      ("auto, index over the heap share", 1000000L, 10000000L, settings(heap = 64L << 20), "join", "driver heap"),
      ("filter, over the heap share", 1000000L, 1000L, settings("filter", heap = 64L << 20), "join", "filter.force=true overrides"),
      ("filter forced over the heap share", 1000000L, 1000L, settings("filter", heap = 64L << 20, force = true), "filter", "strategy=filter"),
      ("join", 10L, 10L, settings("join"), "join", "strategy=join"),
      ("native", 10L, 10000000L, settings("native"), "native", "strategy=native"))
    cases.foreach { case (name, deleteRows, rowsWith, set, strategy, reason) =>
      val plan = CostModel.plan(scanDeletes(Seq(deleteFile(deleteRows, 0)), rowsWith), schema, set)
      assert(strategyOf(plan) == strategy, name)
      assert(plan.reason.contains(reason), s"$name: ${plan.reason}")
    }
  }

  test("a query calling input_file_name() gets no shuffled join: native instead, broadcast and filter kept") {
    val refs = Seq(deleteFile(10, 0))
    val keep = settings("join", broadcast = -1).copy(rowsStayInReadTask = true)
    val plan = CostModel.plan(scanDeletes(refs), schema, keep)
    assert(strategyOf(plan) == "native" && plan.reason.contains("input_file_name()"), plan.reason)
    assert(strategyOf(CostModel.plan(scanDeletes(refs), schema, settings("join").copy(rowsStayInReadTask = true))) == "join")
    assert(strategyOf(CostModel.plan(scanDeletes(refs), schema, settings("filter", broadcast = -1)
      .copy(rowsStayInReadTask = true))) == "filter")
    assert(strategyOf(CostModel.plan(scanDeletes(refs), schema, settings("join", broadcast = -1))) == "join")
  }

  test("each join part is broadcast or shuffled on its own size, and the reason says so") {
    // Keys are longs: 8 + 24 bytes a delete row. Scoped: 10 rows (320 bytes); global: 1 row (32).
    val refs = Seq(deleteFile(10, 0), deleteFile(1, ScanDeletes.GlobalScope))
    val cases = Seq(
      (1L << 20, Seq(true -> JoinDistribution.Broadcast, false -> JoinDistribution.Broadcast), "broadcast join"),
      (100L, Seq(true -> JoinDistribution.Shuffled, false -> JoinDistribution.Broadcast), "broadcast for (id) global"),
      (10L, Seq(true -> JoinDistribution.Shuffled, false -> JoinDistribution.Shuffled), "shuffled join"),
      (-1L, Seq(true -> JoinDistribution.Shuffled, false -> JoinDistribution.Shuffled), "shuffled join"))
    cases.foreach { case (limit, expected, reason) =>
      val plan = CostModel.plan(scanDeletes(refs, rowsWith = 10000000), schema,
        settings(broadcast = limit).copy(filterMaxDeleteRows = 0))
      assert(sides(plan) == expected, s"limit $limit")
      assert(plan.reason.contains(reason), plan.reason)
      expected.foreach { case (byScope, distribution) =>
        assert(plan.describe.contains(s"${distribution.describe} anti join on (id)" +
          (if (byScope) " and partition" else " (global deletes)")), plan.describe)
      }
    }
  }

  test("the broadcast limit never exceeds the heap share") {
    val plan = CostModel.plan(scanDeletes(Seq(deleteFile(1000000, 0)), rowsWith = 10000000), schema,
      settings("join", heap = 64L << 20, broadcast = 1L << 40))
    assert(sides(plan) == Seq(true -> JoinDistribution.Shuffled))
  }

  test("layout: one scan unless files without deletes hold at least as many rows") {
    val refs = Seq(deleteFile(10, 0))
    val cases = Seq((100L, 0L, 0, ScanLayout.OneScan), (100L, 99L, 3, ScanLayout.OneScan),
      (100L, 100L, 3, ScanLayout.Union), (100L, 5000L, 3, ScanLayout.Union))
    cases.foreach { case (rowsWith, rowsWithout, filesWithout, layout) =>
      assert(CostModel.layout(scanDeletes(refs, rowsWith, rowsWithout, filesWithout)) == layout)
      val plan = CostModel.plan(scanDeletes(refs, rowsWith, rowsWithout, filesWithout), schema, settings("filter"))
      assert(plan.asInstanceOf[ScanRewritePlan.Filter].layout == layout)
    }
  }

  test("read tasks: one per ~1M delete rows (4M for a key bitmap), at least one per core for many files, never more than files") {
    val cases = Seq(
      (Seq.fill(10)(350000L), 2, 4), // 3.5M rows in 10 files
      (Seq.fill(100)(10L), 8, 8),    // many small files: one per core
      (Seq(5000000L), 8, 1),         // one file: one task
      (Seq.fill(3)(10L), 8, 3),      // fewer files than cores
      (Seq.fill(20)(250000L), 4, 8),  // 5M rows: 5 tasks' worth, in whole waves of 4 cores
      (Seq.fill(10)(300000L), 2, 4),  // 3M rows on 2 cores: 4, not 3
      (Seq.fill(10)(1000000L), 4, 10)) // 12 in whole waves, but only 10 files
    cases.foreach { case (records, parallelism, tasks) =>
      val read = CostModel.read(records.map(r => deleteFile(r, 0)), settings(parallelism = parallelism))
      assert(read.tasks == tasks, s"$records on $parallelism cores")
    }
    // A key bitmap's tasks read up to 4M rows each: 3x10^7 rows in 30 files on 2 cores, 8 tasks.
    val spread = (0 until 30).map(i => deleteFile(1000000L, -1, bounds = Some((0L, 59999999L))))
    val bitmap = CostModel.plan(scanDeletes(spread, newestData = 0L), schema, settings("filter")).asInstanceOf[ScanRewritePlan.Filter]
    assert(bitmap.indexes.head.kind.isInstanceOf[IndexKind.KeyBitmap] && bitmap.indexes.head.read.tasks == 8)
    assert(CostModel.read(spread, settings(parallelism = 2)).tasks == 30)
  }

  test("every equality set gets its own index, sized by its key types") {
    val refs = Seq(deleteFile(100, 0), deleteFile(50, 0, ids = Seq(2)))
    val plan = CostModel.plan(scanDeletes(refs), schema, settings("filter")).asInstanceOf[ScanRewritePlan.Filter]
    assert(plan.indexes.map(_.set.keyColumns) == Seq(Seq("id"), Seq("name")))
    assert(plan.indexes.map(_.read.records) == Seq(100L, 50L))
    assert(plan.indexes(1).estimatedBytes == eqdelete.deleteindex.HashedKeyIndex.bytesFor(Seq(org.apache.spark.sql.types.StringType), 50))
  }

  test("single-column sets cover the multi-column sets keying on their column: always under filter, shuffled joins only") {
    // (id), (name) and (id, name): both single sets cover the pair, at their key positions.
    val refs = Seq(deleteFile(10, 0), deleteFile(10, 0, ids = Seq(2)), deleteFile(1000, 0, ids = Seq(1, 2)))
    def coverings(covered: Seq[Covering]) = covered.map(c => (c.by.set.equalityIds, c.keyPosition))
    val filter = CostModel.plan(scanDeletes(refs), schema, settings("filter")).asInstanceOf[ScanRewritePlan.Filter]
    assert(filter.indexes.map(i => coverings(i.coveredBy)) == Seq(Nil, Seq(Seq(1) -> 0, Seq(2) -> 1), Nil))
    assert(filter.coveredSets.map(_.equalityIds) == Seq(Seq(1, 2)))
    assert(filter.describe.contains("index of (id, name): 1 file(s), 1000 row(s), 1 read task(s), rows covered by (id) and (name) dropped"))
    val cases = Seq(
      ("shuffled", settings("join", broadcast = 10), true),
      ("broadcast", settings("join"), false),
      ("coverers over filterMaxDeleteRows", settings("join", broadcast = 10).copy(filterMaxDeleteRows = 5), false),
      ("coverers over the heap share", settings("join", broadcast = 10, heap = 1L << 10), false))
    cases.foreach { case (name, set, covers) =>
      val join = CostModel.plan(scanDeletes(refs), schema, set).asInstanceOf[ScanRewritePlan.Join]
      val pair = join.joins.filter(_.set.equalityIds == Seq(1, 2))
      assert(pair.forall(_.coveredBy.nonEmpty == covers), s"$name: ${join.describe}")
      assert(join.joins.filter(_.set.equalityIds.size == 1).forall(_.coveredBy.isEmpty), name)
    }
  }

  test("a key bitmap only where sequence numbers cannot matter and the keys are dense; else the table") {
    def global(records: Long, lower: Long, upper: Long, seq: Long = 5) = deleteFile(records, -1, seq, bounds = Some((lower, upper)))
    // (case, delete files, newest data sequence number, the bitmap's bounds and oldest sequence number if one)
    val cases = Seq(
      ("global, dense, newer than every data file", Seq(global(1000, 0, 1999), global(500, 2000, 2999, seq = 3)), 2L, Some((0L, 2999L, 3L))),
      ("negative keys", Seq(global(1000, -3000, -1001)), 2L, Some((-3000L, -1001L, 5L))),
      ("a data file as new as a delete file", Seq(global(1000, 0, 1999), global(500, 2000, 2999, seq = 3)), 3L, None),
      ("a partition-scoped delete file", Seq(global(1000, 0, 1999), deleteFile(10, 0, bounds = Some((0L, 9L)))), 2L, None),
      ("a delete file without the key's bounds", Seq(global(1000, 0, 1999), deleteFile(10, -1)), 2L, None),
      ("sparse: 64 bits a key or more", Seq(global(1000, 0, 64000)), 2L, None),
      ("just dense enough", Seq(global(1000, 0, 63999)), 2L, Some((0L, 63999L, 5L))),
      ("the whole long range", Seq(global(1000, Long.MinValue, Long.MaxValue)), 2L, None),
      ("a string key", Seq(deleteFile(10, -1, ids = Seq(2), bounds = Some((0L, 1L)))), 2L, None),
      ("two key columns", Seq(deleteFile(10, -1, ids = Seq(1, 2), bounds = Some((0L, 1L)))), 2L, None))
    cases.foreach { case (name, refs, newestData, expected) =>
      val plan = CostModel.plan(scanDeletes(refs, newestData = newestData), schema, settings("filter"))
        .asInstanceOf[ScanRewritePlan.Filter]
      val indexed = plan.indexes.head
      expected match {
        case Some((lower, upper, oldest)) =>
          assert(indexed.kind == IndexKind.KeyBitmap(lower, upper, oldest), name)
          assert(indexed.estimatedBytes == eqdelete.deleteindex.KeyBitmapIndex.bytesFor(upper - lower + 1), name)
          assert(plan.describe.contains(s"key bitmap index of (id): ${refs.size} file(s)") &&
            plan.describe.contains(s"keys $lower .. $upper, every delete newer than every data file read"), s"$name: ${plan.describe}")
        case None =>
          assert(indexed.kind == IndexKind.Table, name)
          assert(!plan.describe.contains("bitmap"), s"$name: ${plan.describe}")
      }
    }
  }
}
