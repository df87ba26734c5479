package eqdelete.deleteindex.build

import scala.util.Random

import eqdelete.deleteindex.{DeleteKeyIndex, HashedKeyIndex, KeyBitmapIndex, LongKeyIndex}
import eqdelete.planning.{DeletePlanner, ScanDeletes}
import eqdelete.read.DeleteRowReader
import eqdelete.read.DeleteRows.TaskFile
import eqdelete.testing.{IcebergTables, TestSpark}

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.eqdelete.compat.IcebergSparkTables
import org.apache.spark.sql.types.{BinaryType, BooleanType, DataType, DateType, Decimal, DecimalType, DoubleType, FloatType, LongType, StringType, TimestampType}
import org.apache.spark.unsafe.types.UTF8String
import org.scalatest.funsuite.AnyFunSuite

/**
 * A task's delete rows shipped as a [[DeleteRowBatch]] (keys once, scope and sequence number
 * once per run of rows) build the same index as the rows added one by one.
 */
class DeleteRowBatchSuite extends AnyFunSuite {

  private val Global = ScanDeletes.GlobalScope.toLong

  /** Rows as delete files give them: runs of one (scope, seq), a pair coming back after others. */
  private def rows(types: Seq[DataType], random: Random): Seq[(Seq[Any], Long, Long)] = {
    val files = Seq((Global, 3L), (0L, 5L), (1L, 5L), (Global, 3L), (0L, 9L), (Int.MaxValue.toLong, 4L))
    files.flatMap { case (scope, seq) =>
      Seq.fill(random.nextInt(40))((types.map {
        case LongType => if (random.nextInt(8) == 0) null else java.lang.Long.valueOf(random.nextInt(60))
        case _ => if (random.nextInt(8) == 0) null else UTF8String.fromString(s"k${random.nextInt(60)}")
      }, scope, seq))
    }
  }

  private def shipped(batch: DeleteRowBatch): DeleteRowBatch = {
    val bytes = new java.io.ByteArrayOutputStream()
    val out = new java.io.ObjectOutputStream(bytes)
    out.writeObject(batch)
    out.close()
    new java.io.ObjectInputStream(new java.io.ByteArrayInputStream(bytes.toByteArray)).readObject().asInstanceOf[DeleteRowBatch]
  }

  /** Whether the vectorized reader reads `file`'s keys; its batches drained, so the file is closed. */
  private def vectorized(reader: DeleteRowReader, file: TaskFile): Boolean =
    reader.keyBatches(file.file).exists { batches => batches.foreach(_ => ()); true }

  test("hashed keys of every packed type, NaN, -0.0 and NULL included, build the index the rows give one by one") {
    val types = Seq(DoubleType, FloatType, DecimalType(10, 2), DecimalType(30, 4), DateType, TimestampType, BooleanType, BinaryType)
    val random = new Random(19)
    val doubles = Seq(0.0, -0.0, Double.NaN, 1.5, -2.25)
    def value(t: DataType): Any = if (random.nextInt(10) == 0) null else t match {
      case DoubleType => doubles(random.nextInt(doubles.size))
      case FloatType => doubles(random.nextInt(doubles.size)).toFloat
      case d: DecimalType => Decimal(BigDecimal(random.nextInt(5)) / 4, d.precision, d.scale)
      case DateType => random.nextInt(3)
      case TimestampType => random.nextInt(3).toLong * 1000000L
      case BooleanType => random.nextBoolean()
      case BinaryType => Array[Byte](random.nextInt(2).toByte)
    }
    val deletes = Seq.fill(3000)((types.map(value), Seq(Global, 0L, 2L)(random.nextInt(3)), 1L + random.nextInt(5)))
    val batch = shipped(DeleteRowBatch(deletes.iterator.map { case (key, scope, seq) => InternalRow.fromSeq(key ++ Seq(scope, seq)) },
      types, primitive = false, indexKeys = deletes.size))
    val fromBatch = new HashedKeyIndex(types, deletes.size)
    DeleteRowBatch.addAll(Seq(batch), fromBatch, threads = 1)
    val oneByOne = new HashedKeyIndex(types, deletes.size)
    deletes.foreach { case (key, scope, seq) => oneByOne.add(scope, key.toArray, seq) }
    Seq(fromBatch, oneByOne).foreach(_.seal())
    assert(fromBatch.distinctKeys == oneByOne.distinctKeys && oneByOne.distinctKeys > 100)
    val probes = deletes.map(_._1) ++ Seq.fill(3000)(types.map(value))
    for (scope <- Seq(0L, 2L, 5L); key <- probes) {
      assert(fromBatch.newestOf(scope, key.toArray) == oneByOne.newestOf(scope, key.toArray), s"${key.mkString(", ")} in $scope")
    }
  }

  test("past 2M keys the hashed index is sealed without a Bloom filter and still finds exactly its keys") {
    val n = 2100000
    val index = new HashedKeyIndex(Seq(StringType), n)
    (0 until n).foreach(i => index.add(Global, Array[Any](UTF8String.fromString(s"k${2 * i}")), 3L))
    index.seal()
    assert(index.distinctKeys == n)
    assert(index.mightContain(0x1234L) && index.mightContain(-1L)) // no filter: every hash may be there
    (0 until 2 * n by 97).foreach { k =>
      val found = index.newestOf(0L, Array[Any](UTF8String.fromString(s"k$k")))
      assert(found == (if (k % 2 == 0) 3L else DeleteKeyIndex.NoDelete), s"k$k")
    }
    intercept[IllegalArgumentException](index.add(Global, Array[Any](UTF8String.fromString("late")), 4L))
  }

  Seq(Seq(LongType), Seq(StringType), Seq(LongType, StringType)).foreach { types =>
    test(s"a batch of ${types.mkString(", ")} keys builds the index the rows give one by one") {
      (0 until 5).foreach { seed =>
        val random = new Random(seed)
        val deletes = rows(types, random)
        val newest = deletes.map(_._3).max
        val primitive = DeleteKeyIndex.isPrimitive(types, newest)
        val internalRows = deletes.iterator.map { case (key, scope, seq) => InternalRow.fromSeq(key ++ Seq(scope, seq)) }
        val batch = shipped(DeleteRowBatch(internalRows, types, primitive, indexKeys = deletes.size, expectedRows = 4))
        val fromBatch = DeleteKeyIndex.forKeyTypes(types, deletes.size, newest)
        DeleteRowBatch.addAll(Seq(batch), fromBatch, threads = 2)
        val oneByOne = DeleteKeyIndex.forKeyTypes(types, deletes.size, newest)
        deletes.foreach { case (key, scope, seq) => oneByOne.add(scope, key.toArray, seq) }
        Seq(fromBatch, oneByOne).foreach(_.seal())
        assert(fromBatch.distinctKeys == oneByOne.distinctKeys)
        for (scope <- Seq(0L, 1L, 2L, Int.MaxValue.toLong); (key, _, _) <- deletes) {
          assert(fromBatch.newestOf(scope, key.toArray) == oneByOne.newestOf(scope, key.toArray), s"seed $seed, $key in $scope")
        }
      }
    }
  }

  test("primitive batches added in one pass over the table, stretch by stretch, build the index the rows give one by one") {
    val random = new Random(7)
    val scopes = Seq(Global, 0L, 1L)
    val tasks = Seq.fill(6)(Seq.fill(random.nextInt(3000)) {
      val key: java.lang.Long = if (random.nextInt(50) == 0) null else java.lang.Long.valueOf(random.nextInt(4000))
      (key, scopes(random.nextInt(3)), 1L + random.nextInt(9))
    })
    // A task reads files one after another: a few long runs of (scope, seq); or many small files,
    // each a run of a row or two.
    for (rows <- Seq(tasks.map(_.sortBy(r => (r._2, r._3))), tasks)) {
      val total = rows.map(_.size).sum
      // Sized as the tasks assumed, and sized otherwise (keys then come out of order: still all added).
      Seq(total.toLong, 10L).foreach { sizedFor =>
        val batches = rows.map(task => shipped(DeleteRowBatch(
          task.iterator.map { case (k, s, q) => InternalRow(k, s, q) }, Seq(LongType), primitive = true, indexKeys = sizedFor)))
        val onePass = new LongKeyIndex(sizedFor)
        DeleteRowBatchFilling.addInSlotOrder(batches, onePass, threads = 3)
        val byBatch = new LongKeyIndex(sizedFor)
        for (task <- rows; (k, scope, seq) <- task) byBatch.add(scope, Array[Any](k), seq)
        Seq(onePass, byBatch).foreach(_.seal())
        assert(onePass.distinctKeys == byBatch.distinctKeys)
        for (scope <- Seq(0L, 1L, 2L); key <- (0L until 4000L).map(k => java.lang.Long.valueOf(k)) :+ null) {
          assert(onePass.newestOf(scope, Array[Any](key)) == byBatch.newestOf(scope, Array[Any](key)), s"$key in $scope")
        }
      }
    }
  }

  test("hashed batches added in one pass over the table build the index the rows give one by one, however the tasks ordered them") {
    val random = new Random(13)
    val types = Seq(LongType, StringType)
    val scopes = Seq(Global, 0L, 3L)
    // Runs of one (scope, seq) as files give them, keys repeated across runs, scopes and tasks.
    val tasks = Seq.fill(4)(Seq.fill(8) {
      val (scope, seq) = (scopes(random.nextInt(3)), 1L + random.nextInt(6))
      Seq.fill(random.nextInt(2000)) {
        val k = random.nextInt(3000)
        (Seq[Any](java.lang.Long.valueOf(k % 97), if (k % 41 == 0) null else UTF8String.fromString(s"key-$k")), scope, seq)
      }
    }.flatten)
    val deletes = tasks.flatten
    // (the keys the tasks ordered for, the keys the index is sized for): as sized; out of order;
    // a table past 65,536 slots, walked in stretches of 8, in order and out of it; a table that
    // grows while the batches are added.
    Seq((deletes.size.toLong, deletes.size.toLong), (50L, deletes.size.toLong), (200000L, 200000L),
        (deletes.size.toLong, 200000L), (deletes.size.toLong, 50L)).foreach { case (sizedFor, indexKeys) =>
      val batches = tasks.map(task => shipped(DeleteRowBatch(
        task.iterator.map { case (key, scope, seq) => InternalRow.fromSeq(key ++ Seq(scope, seq)) }, types,
        primitive = false, indexKeys = sizedFor)))
      val oneByOne = new HashedKeyIndex(types, deletes.size)
      deletes.foreach { case (key, scope, seq) => oneByOne.add(scope, key.toArray, seq) }
      oneByOne.seal()
      // On one thread, and on several, each its region, where the table is big enough to split;
      // on one where the records before duplicates are dropped would outgrow what the index holds.
      val shippedRecords = batches.map(b => b.keys.length * 24L + b.packed.length).sum
      for ((threads, maxRecordBytes) <- Seq((1, HashedKeyIndex.MaxRecordBytes), (3, HashedKeyIndex.MaxRecordBytes), (3, shippedRecords - 1))) {
        val fromBatches = new HashedKeyIndex(types, indexKeys, maxRecordBytes)
        DeleteRowBatchFilling.addInSlotOrder(batches, fromBatches, threads)
        fromBatches.seal()
        assert(fromBatches.distinctKeys == oneByOne.distinctKeys && oneByOne.distinctKeys > 3000)
        for (scope <- Seq(0L, 3L, 8L); (key, _, _) <- deletes) {
          assert(fromBatches.newestOf(scope, key.toArray) == oneByOne.newestOf(scope, key.toArray),
            s"$key in $scope, sized for $sizedFor, $threads threads")
        }
      }
    }
  }

  test("threads filling regions of a hashed table add the keys whose probe leaves their region, and their duplicates, once") {
    val types = Seq(StringType)
    val (indexKeys, mask) = (32768L, 65535) // 65,536 slots: two regions split at slot 32,768
    def key(i: Int) = UTF8String.fromString(s"key-$i")
    def home(i: Int) = HashedKeyIndex.slotOf(eqdelete.deleteindex.KeyHash.of(Array[Any](key(i))), Global, mask)
    // Four keys homed in the first region's last slot and two in the second's first: three probes
    // leave the first region, and those keys, added after, find the second region's first slots taken.
    val last = (0 until 2000000).iterator.filter(home(_) == 32767).take(4).toSeq
    val first = (0 until 2000000).iterator.filter(home(_) == 32768).take(2).toSeq
    val others = (0 until 20000).filterNot(i => last.contains(i) || first.contains(i))
    // A later file deletes some again, the crossing ones among them, with a newer sequence number.
    val files = Seq((last ++ first ++ others, 3L), (last.drop(1) ++ first.take(1) ++ others.take(500), 7L))
    val batches = files.map { case (keys, seq) => shipped(DeleteRowBatch(
      keys.iterator.map(i => InternalRow(key(i), Global, seq)), types, primitive = false, indexKeys = indexKeys)) }
    val regions = new HashedKeyIndex(types, indexKeys)
    assert(regions.regionBounds(2, 20006L) == Seq(0, 32768, 65536)) // 65,536 stretches of one slot each
    DeleteRowBatchFilling.addInSlotOrder(batches, regions, threads = 2)
    regions.seal()
    val oneByOne = new HashedKeyIndex(types, indexKeys)
    for ((keys, seq) <- files; i <- keys) oneByOne.add(Global, Array[Any](key(i)), seq)
    oneByOne.seal()
    assert(regions.distinctKeys == oneByOne.distinctKeys && regions.distinctKeys == (last ++ first ++ others).size)
    assert(regions.retainedBytes == oneByOne.retainedBytes) // records moved together, no gap left
    for (i <- 0 until 20500) {
      assert(regions.newestOf(0L, Array[Any](key(i))) == oneByOne.newestOf(0L, Array[Any](key(i))), s"key-$i")
    }
    assert((last ++ first).map(i => regions.newestOf(0L, Array[Any](key(i)))) == Seq(3L, 7L, 7L, 7L, 7L, 3L))
  }

  test("hashed batches' records are allocated as exactly as the batches count them, not by the estimate for strings") {
    val types = Seq(StringType)
    val keys = (0 until 5000).map(k => UTF8String.fromString("k" * (k % 7) + k))
    val batch = shipped(DeleteRowBatch(keys.iterator.map(k => InternalRow(k, Global, 2L)), types, primitive = false, indexKeys = 5000))
    val index = new HashedKeyIndex(types, 5000)
    val slotsOnly = index.retainedBytes // no record is allocated before the first key
    DeleteRowBatchFilling.addInSlotOrder(Seq(batch), index, threads = 2)
    // A record: hash, scope, seq (24 bytes), its packed length (4), then the packed string: a non-NULL tag, its length, its bytes.
    assert(index.retainedBytes - slotsOnly == keys.map(k => 24L + 4 + 1 + 4 + k.numBytes).sum)
    assert(index.seal().distinctKeys == 5000 && index.newestOf(Global, Array[Any](keys(4321))) == 2L)
  }

  test("the hashed insert order is a permutation walking the table's slots front to back") {
    val random = new Random(17)
    val hashes = Array.fill(5000)(random.nextLong())
    val (from, until, keys) = (100, 4100, 4000L)
    val order = HashedKeyIndex.insertOrder(hashes, from, until, 3L, keys)
    assert(order.sorted.toSeq == (0 until until - from))
    val mask = 8191 // the table for 4,000 keys: 8,192 slots, at most half full
    val slots = order.map(i => HashedKeyIndex.slotOf(hashes(from + i), 3L, mask))
    assert(slots.toSeq == slots.sorted.toSeq && slots.distinct.length > 2000)
    // A table past 65,536 slots is walked stretch by stretch (its slots' upper 16 bits), in any order within one.
    val big = HashedKeyIndex.insertOrder(hashes, 0, 5000, 3L, 100000L) // 262,144 slots: stretches of 4
    assert(big.sorted.toSeq == (0 until 5000))
    val stretches = big.map(i => HashedKeyIndex.slotOf(hashes(i), 3L, 262143) >>> 2)
    assert(stretches.toSeq == stretches.sorted.toSeq)
    // The stretches an index of that size walks when it adds batches are the same.
    val index = new HashedKeyIndex(Seq(LongType), 100000L)
    assert(big.map(i => index.stretchOf(hashes(i), 3L)).toSeq == stretches.toSeq)
  }

  test("threads filling regions of a table past the Bloom filter's size build the index one thread builds") {
    val random = new Random(11)
    val scopes = Seq(Global, 0L, 5L)
    // 2.4M rows over 1.5M distinct keys: duplicates across tasks, scopes and sequence numbers.
    val tasks = Seq.fill(8)(Array.fill(300000)((random.nextInt(1500000).toLong * 7919L, scopes(random.nextInt(3)), 1L + random.nextInt(40))))
    val total = tasks.map(_.length.toLong).sum
    val batches = tasks.map(task => shipped(DeleteRowBatch(
      task.sortBy(r => (r._2, r._3)).iterator.map { case (k, s, q) => InternalRow(k, s, q) }, Seq(LongType), primitive = true, indexKeys = total)))
    val indexes = Seq(1, 2, 7).map { threads =>
      val index = new LongKeyIndex(total)
      DeleteRowBatchFilling.addInSlotOrder(batches, index, threads)
      index.seal()
    }
    val byBatch = new LongKeyIndex(total)
    for (task <- tasks; (k, scope, seq) <- task) byBatch.add(scope, Array[Any](k), seq)
    byBatch.seal()
    indexes.foreach(index => assert(index.distinctKeys == byBatch.distinctKeys))
    for (k <- (0L until 1600000L by 3L).map(_ * 7919L); scope <- Seq(0L, 5L, 9L); index <- indexes) {
      val key = Array[Any](java.lang.Long.valueOf(k))
      assert(index.newestOf(scope, key) == byBatch.newestOf(scope, key), s"$k in $scope")
    }
  }

  test("a primitive key read from the vectorized reader's column batches gives the index its rows give") {
    val spark = TestSpark.session
    val tables = new IcebergTables(spark, "key_columns")
    import spark.implicits._
    val table = tables.create(partitioned = true)
    tables.insert(table, (0L until 50L).map(k => (k, s"v$k", (k % 2).toInt)))
    tables.deleteKeys(table, (0L until 50L by 3L).map(k => (k, (k % 2).toInt)))                 // scoped, one file a partition
    tables.deleteKeys(table, (0L until 50L by 7L).map(k => (k, 0)), global = true)              // global, newer
    tables.delete(table, Seq("k"), Seq[(java.lang.Long, Int)]((null, 1), (5L, 1)).toDF("k", "p")) // a NULL key, newest
    val iceberg = IcebergSparkTables.load(spark, table)
    iceberg.refresh()
    val set = DeletePlanner.plan(iceberg, iceberg.currentSnapshot().snapshotId(), iceberg.schema()).get.deleteSets.head
    val reader = new DeleteRowReader(iceberg.io(), iceberg.schema(), set.equalityIds)
    val files = set.files.map(f => TaskFile(f.file, f.scope.toLong, f.sequenceNumber))
    assert(files.map(_.scope).toSet.size == 3 && files.forall(f => vectorized(reader, f)))

    val fromColumns = new LongKeyIndex(set.records)
    DeleteRowBatchFilling.addInSlotOrder(Seq(shipped(DeleteRowBatch.ofKeyColumns(files.iterator, reader, LongType, set.records, 4))),
      fromColumns, threads = 2)
    val fromRows = new LongKeyIndex(set.records)
    for (file <- files; row <- reader.read(file.file)) {
      fromRows.add(file.scope, Array[Any](if (row.isNullAt(0)) null else row.getLong(0)), file.sequenceNumber)
    }
    Seq(fromColumns, fromRows).foreach(_.seal())
    assert(fromColumns.distinctKeys == fromRows.distinctKeys && fromRows.distinctKeys > 20)
    for (scope <- files.map(_.scope).distinct :+ 7L; key <- (0L until 50L).map(k => java.lang.Long.valueOf(k)) :+ null) {
      assert(fromColumns.newestOf(scope, Array[Any](key)) == fromRows.newestOf(scope, Array[Any](key)), s"$key in $scope")
    }
  }

  Seq(Seq("v"), Seq("v", "k")).foreach { keyColumns =>
    test(s"hashed keys (${keyColumns.mkString(", ")}) read from the vectorized reader's column batches give the index their rows give") {
      val spark = TestSpark.session
      val tables = new IcebergTables(spark, s"hashed_columns_${keyColumns.size}")
      import spark.implicits._
      val table = tables.create(partitioned = true)
      tables.insert(table, (0L until 60L).map(k => (k, s"v$k", (k % 2).toInt)))
      val rows = (0L until 60L by 3L).map(k => (k, s"v$k", (k % 2).toInt))
      tables.delete(table, keyColumns, rows.toDF("k", "v", "p"))                                   // scoped, one file a partition
      tables.delete(table, keyColumns, rows.take(5).map(r => (r._1, r._2, 0)).toDF("k", "v", "p"), global = true)
      tables.delete(table, keyColumns, Seq[(java.lang.Long, String, Int)]((7L, null, 1), (8L, "v8", 1)).toDF("k", "v", "p")) // a NULL
      val iceberg = IcebergSparkTables.load(spark, table)
      iceberg.refresh()
      val set = DeletePlanner.plan(iceberg, iceberg.currentSnapshot().snapshotId(), iceberg.schema()).get.deleteSets.head
      val reader = new DeleteRowReader(iceberg.io(), iceberg.schema(), set.equalityIds)
      val types = reader.keyTypes
      val files = set.files.map(f => TaskFile(f.file, f.scope.toLong, f.sequenceNumber))
      assert(files.map(_.scope).toSet.size == 3 && files.forall(f => vectorized(reader, f)))

      val fromColumns = new HashedKeyIndex(types, set.records)
      DeleteRowBatch.addAll(Seq(shipped(DeleteRowBatch.ofHashedKeyColumns(files.iterator, reader, types, set.records, 4))), fromColumns, 1)
      val fromRows = new HashedKeyIndex(types, set.records)
      for (file <- files; row <- reader.read(file.file)) {
        fromRows.add(file.scope, types.indices.map(i => row.get(i, types(i))).toArray, file.sequenceNumber)
      }
      Seq(fromColumns, fromRows).foreach(_.seal())
      assert(fromColumns.distinctKeys == fromRows.distinctKeys && fromRows.distinctKeys > 20)
      val probes = (0L until 60L).map(k => Map("k" -> java.lang.Long.valueOf(k), "v" -> UTF8String.fromString(s"v$k"))) :+
        Map("k" -> java.lang.Long.valueOf(7L), "v" -> null)
      for (scope <- files.map(_.scope).distinct :+ 7L; probe <- probes) {
        val key = set.equalityIds.map(id => probe(iceberg.schema().findColumnName(id))).toArray[Any]
        assert(fromColumns.newestOf(scope, key) == fromRows.newestOf(scope, key), s"${key.mkString(", ")} in $scope")
      }
    }
  }

  test("a key bitmap built from the parts real delete files give holds their keys, NULL included") {
    val spark = TestSpark.session
    val tables = new IcebergTables(spark, "key_bitmap")
    import spark.implicits._
    val table = tables.create()
    tables.insert(table, (0L until 300L).map(k => (k, s"v$k", 0)))
    val (dense, sparse) = ((10L until 200L by 2L).toSeq, Seq(3L, 299L))
    tables.deleteKeys(table, dense.map(k => (k, 0)), global = true)
    tables.deleteKeys(table, sparse.map(k => (k, 0)), global = true)
    // A file of only NULL keys would be pruned: no data row has a NULL key.
    tables.delete(table, Seq("k"), Seq[(java.lang.Long, Int)]((null, 0), (201L, 0)).toDF("k", "p"), global = true)
    val iceberg = IcebergSparkTables.load(spark, table)
    iceberg.refresh()
    val set = DeletePlanner.plan(iceberg, iceberg.currentSnapshot().snapshotId(), iceberg.schema()).get.deleteSets.head
    val reader = new DeleteRowReader(iceberg.io(), iceberg.schema(), set.equalityIds)
    // One task a file: the dense one ships a bitmap, the one-key one its distance (with the NULL), the sparse one its keys.
    val parts = set.files.map(f => DeleteRowBatch.bitmapPart(Iterator(TaskFile(f.file, f.scope.toLong, f.sequenceNumber)), reader, LongType, 4))
    assert(parts.count(_.words.nonEmpty) == 1 && parts.count(_.distances.nonEmpty) == 1 && parts.count(_.keys.nonEmpty) == 1)
    assert(parts.count(_.nullDeleted) == 1 && parts.exists(p => p.distances.nonEmpty && p.nullDeleted))
    val index = KeyBitmapIndex.of(0, 299, set.files.map(_.sequenceNumber).min, parts, set.describeKeys)
    (-5L until 310L).foreach { k =>
      assert((index.newestOf(0, Array[Any](k)) != DeleteKeyIndex.NoDelete) == (dense ++ sparse :+ 201L).contains(k), s"key $k")
    }
    assert(index.newestOf(0, Array[Any](null)) != DeleteKeyIndex.NoDelete)
  }

  test("an empty task ships an empty batch") {
    val index = DeleteKeyIndex.forKeyTypes(Seq(LongType), 1, 1)
    DeleteRowBatch.addAll(Seq(shipped(DeleteRowBatch(Iterator.empty, Seq(LongType), primitive = true, indexKeys = 1))), index, 1)
    assert(index.distinctKeys == 0)
  }
}
