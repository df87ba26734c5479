package eqdelete.deleteindex.build

import java.util.UUID

import scala.util.Random

import eqdelete.deleteindex.{DeleteKeyIndex, HashedKeyIndex, IndexCapacityException, TwoLongKeyForm, TwoLongKeyIndex}
import eqdelete.planning.{DeletePlanner, ScanDeletes}
import eqdelete.read.DeleteRowReader
import eqdelete.read.DeleteRows.TaskFile
import eqdelete.testing.{IcebergTables, TestSpark}

import org.apache.spark.sql.types.StringType
import org.apache.spark.unsafe.types.UTF8String
import org.apache.spark.sql.eqdelete.compat.IcebergSparkTables
import org.scalatest.funsuite.AnyFunSuite

/**
 * String keys that are all in one form, UUIDs in canonical form or strings of at most 15 bytes,
 * held as two longs: the same newest delete for every key as the hashed index of the same rows,
 * whether added one by one, from tasks' batches on several threads, or read from real delete
 * files; any key in no form or another (or NULL) gives the set the hashed index.
 */
class TwoLongKeyIndexSuite extends AnyFunSuite {

  private val Global = ScanDeletes.GlobalScope.toLong

  private def utf8(s: String): UTF8String = if (s == null) null else UTF8String.fromString(s)
  private def randomUuid(random: Random): String = new UUID(random.nextLong(), random.nextLong()).toString
  private val Forms = Seq(TwoLongKeyForm.Uuid, TwoLongKeyForm.Short)

  /** A string of 0-15 UTF-8 bytes: ASCII, two- and three-byte characters, NUL bytes (at the end too). */
  private def randomShort(random: Random): String = {
    val parts = Seq("a", "Z", "7", "-", "\u0000", "\u00e9", "\u20ac")
    Iterator.continually(parts(random.nextInt(parts.size))).scanLeft("")(_ + _)
      .takeWhile(_.getBytes("UTF-8").length <= 15).drop(random.nextInt(6)).next()
  }

  private def randomKey(form: TwoLongKeyForm, random: Random): String =
    if (form == TwoLongKeyForm.Uuid) randomUuid(random) else randomShort(random)

  private def halves(s: String, form: TwoLongKeyForm = TwoLongKeyForm.Uuid): Option[(Long, Long)] = {
    val out = new Array[Long](2)
    if (form.read(utf8(s), out, 0, 1)) Some((out(0), out(1))) else None
  }

  test("the canonical form parses to java.util.UUID's bits and back; any other form does not parse") {
    val random = new Random(3)
    (Seq(new UUID(0L, 0L), new UUID(-1L, -1L), new UUID(Long.MinValue, 1L)) ++ Seq.fill(2000)(new UUID(random.nextLong(), random.nextLong())))
      .foreach { uuid =>
        assert(halves(uuid.toString).contains((uuid.getMostSignificantBits, uuid.getLeastSignificantBits)), uuid)
        assert(TwoLongKeyForm.Uuid.write(uuid.getMostSignificantBits, uuid.getLeastSignificantBits).toString == uuid.toString)
      }
    // Where the bytes lie inside a longer buffer, as in a column vector's.
    val inside = ("xx" + "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0" + "yy").getBytes("UTF-8")
    val out = new Array[Long](2)
    assert(TwoLongKeyForm.Uuid.read(UTF8String.fromBytes(inside, 2, 36), out, 0, 1))
    assert(new UUID(out(0), out(1)).toString == "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")
    val canonical = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
    Seq(null, "", canonical.toUpperCase, canonical.replace('f', 'F'), s"{$canonical}", canonical.drop(1), canonical + "0",
      canonical.replace("-", ""), "0f1e2d3c4-b5a-6978-8796-a5b4c3d2e1f0", canonical.replace('0', 'g'),
      canonical.replace("-4b5a-", "-4b5a+"), "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1\u00e9").foreach { s =>
      assert(halves(s).isEmpty, String.valueOf(s))
    }
  }

  test("a string of at most 15 bytes reads to two longs and back, one pair per string; a longer one does not read") {
    val random = new Random(4)
    val strings = (Seq("", "\u0000", "\u0000\u0000", "a", "a\u0000", "abcdefgh", "abcdefgh\u0000", "abcdefghijklmno", "\u20ac\u20ac\u20ac\u20ac\u20ac") ++
      Seq.fill(3000)(randomShort(random))).distinct
    val pairs = strings.map { s =>
      val pair = halves(s, TwoLongKeyForm.Short)
      assert(pair.isDefined, s)
      assert(TwoLongKeyForm.Short.write(pair.get._1, pair.get._2).toString == s)
      pair.get
    }
    assert(pairs.distinct.size == strings.size)
    // Inside a longer buffer, as in a column vector's: only its own bytes are read.
    val inside = "xxkey-12yy".getBytes("UTF-8")
    assert(halves("key-12", TwoLongKeyForm.Short) == {
      val out = new Array[Long](2)
      assert(TwoLongKeyForm.Short.read(UTF8String.fromBytes(inside, 2, 6), out, 0, 1))
      Some((out(0), out(1)))
    })
    Seq(null, "abcdefghijklmnop", "\u20ac\u20ac\u20ac\u20ac\u20ac\u20ac", randomUuid(random)).foreach(s => assert(halves(s, TwoLongKeyForm.Short).isEmpty, String.valueOf(s)))
    // The forms do not overlap: a set's first key says its form.
    assert(TwoLongKeyForm.of(utf8(randomUuid(random)), new Array[Long](2)).contains(TwoLongKeyForm.Uuid))
    assert(TwoLongKeyForm.of(utf8("key-1"), new Array[Long](2)).contains(TwoLongKeyForm.Short))
    assert(TwoLongKeyForm.of(utf8("a string of sixteen"), new Array[Long](2)).isEmpty)
    assert(TwoLongKeyForm.of(null, new Array[Long](2)).isEmpty)
  }

  /** (key, scope, seq) rows over a few hundred keys of `form`: duplicates across scopes and sequence numbers. */
  private def rows(random: Random, n: Int, form: TwoLongKeyForm): Seq[(String, Long, Long)] = {
    val keys = Seq.fill(n / 3)(randomKey(form, random))
    Seq.fill(n)((keys(random.nextInt(keys.size)), Seq(Global, 0L, 1L, Int.MaxValue.toLong)(random.nextInt(4)), 1L + random.nextInt(9)))
  }

  private def hashedOf(deletes: Seq[(String, Long, Long)]): HashedKeyIndex = {
    val index = new HashedKeyIndex(Seq(StringType), deletes.size)
    deletes.foreach { case (key, scope, seq) => index.add(scope, Array[Any](utf8(key)), seq) }
    index.seal()
  }

  /** Asserts `index` gives `reference`'s newest delete of every key (and some more) in every scope, one by one and together. */
  private def assertSame(index: TwoLongKeyIndex, reference: DeleteKeyIndex, keys: Seq[String], random: Random): Unit = {
    assert(index.distinctKeys == reference.distinctKeys)
    val probes = (keys ++ Seq.fill(200)(randomKey(index.form, random)) ++ keys.take(50).map(_.toUpperCase) ++
      keys.take(50).map(_ + "\u0000") :+ null :+ "key-1" :+ "sixteen bytes..." :+ randomUuid(random)).toIndexedSeq
    for (scope <- Seq(Global, 0L, 1L, 2L, Int.MaxValue.toLong)) {
      val expected = probes.map(k => reference.newestOf(scope, Array[Any](utf8(k))))
      probes.zip(expected).foreach { case (k, e) => assert(index.newestOf(scope, Array[Any](utf8(k))) == e, s"$k in $scope") }
      val parsed = new Array[Boolean](probes.size)
      val bits = new Array[Long](2 * probes.size)
      probes.indices.foreach(i => parsed(i) = index.form.read(utf8(probes(i)), bits, 2 * i, 2 * i + 1))
      val out = new Array[Long](probes.size)
      index.newestAll(scope, bits, parsed, probes.size, out, new Array[Long](probes.size))
      assert(out.toSeq == expected, s"all together in $scope")
    }
  }

  test("keys added one by one, the table growing past the keys it was sized for, give the hashed index's newest deletes") {
    for (seed <- 0 until 4; form <- Forms) {
      val random = new Random(seed)
      val deletes = rows(random, 3000, form)
      val index = new TwoLongKeyIndex(expectedKeys = 100, form) // grows
      deletes.foreach { case (key, scope, seq) => index.add(scope, Array[Any](utf8(key)), seq) }
      assertSame(index.seal(), hashedOf(deletes), deletes.map(_._1).distinct, random)
    }
    intercept[IllegalArgumentException](new TwoLongKeyIndex(4, TwoLongKeyForm.Uuid).add(Global, Array[Any](utf8("KEY")), 1L))
    intercept[IllegalArgumentException](new TwoLongKeyIndex(4, TwoLongKeyForm.Short).add(Global, Array[Any](utf8(randomUuid(new Random(1)))), 1L))
    intercept[IndexCapacityException](new TwoLongKeyIndex(4, TwoLongKeyForm.Uuid).addBits(Global, 1L, 2L, TwoLongKeyIndex.MaxSequenceNumber + 1))
  }

  /** One task's batch of `deletes`, run by run as its files gave them, for an index sized for `indexKeys`. */
  private def batchOf(deletes: Seq[(String, Long, Long)], indexKeys: Long, form: TwoLongKeyForm = TwoLongKeyForm.Uuid): DeleteRowBatch = {
    val keys = new TaskKeys(4, twoLongs = true)
    deletes.foreach { case (key, scope, seq) =>
      keys.startRun(scope, seq)
      val (high, low) = halves(key, form).get
      keys.addPair(high, low)
    }
    keys.pairs(indexKeys, form)
  }

  test("tasks' batches filled on one thread and on several, the table past the Bloom filter's size, give the keys added one by one") {
    val random = new Random(5)
    for (form <- Forms) {
      val deletes = rows(random, 60000, form)
      // Runs of one (scope, seq), as delete files give them: sorted, a pair coming back in another task.
      val tasks = deletes.grouped(7000).map(_.sortBy(d => (d._2, d._3))).toSeq
      val reference = hashedOf(deletes)
      // Past the Bloom filter's size for one form: the table is the same for both.
      for (indexKeys <- Seq(deletes.size.toLong) ++ Seq(2500000L).filter(_ => form == TwoLongKeyForm.Uuid); threads <- Seq(1, 2, 3)) {
        val index = new TwoLongKeyIndex(indexKeys, form)
        // Batches ordered for this size fill regions on threads; for another size, one thread.
        val batches = tasks.map(task => batchOf(task, if (threads == 3) indexKeys + 1 else indexKeys, form))
        DeleteRowBatch.addAll(batches, index, threads)
        assertSame(index.seal(), reference, deletes.map(_._1).distinct, random)
      }
    }
    // A batch of the other form is refused, never read as this one's.
    val short = batchOf(Seq(("key-1", Global, 1L)), 10, TwoLongKeyForm.Short)
    intercept[IllegalArgumentException](DeleteRowBatch.addAll(Seq(short), new TwoLongKeyIndex(10, TwoLongKeyForm.Uuid), 1))
  }

  test("keys whose probe leaves their thread's region, or wraps past the table's end, are added once, their duplicates' newest sequence number kept") {
    val indexKeys = 2500000L // past the Bloom filter's size: the table splits into regions
    val probe = new TwoLongKeyIndex(indexKeys, TwoLongKeyForm.Uuid)
    val random = new Random(13)
    // 150 keys homed in the last stretch of the first of two regions (about 59 slots) and 150 in
    // the table's last: their probes must run past the region's end, or the table's.
    def homedIn(stretch: Int): Seq[String] = Iterator.continually((random.nextLong(), random.nextLong()))
      .filter { case (high, low) => probe.stretchOf(high, low, Global) == stretch }
      .take(150).map { case (high, low) => new UUID(high, low).toString }.toSeq
    val crowded = homedIn(TwoLongKeyIndex.Stretches / 2 - 1) ++ homedIn(TwoLongKeyIndex.Stretches - 1)
    val spread = Seq.fill(5000)(randomUuid(random))
    val first = (crowded ++ spread).map(k => (k, Global, 2L))
    val again = (crowded.filter(_ => random.nextBoolean()) ++ spread.take(100)).map(k => (k, Global, 5L))
    val reference = hashedOf(first ++ again)
    for (threads <- Seq(1, 2)) {
      val index = new TwoLongKeyIndex(indexKeys, TwoLongKeyForm.Uuid)
      DeleteRowBatch.addAll(Seq(batchOf(first, indexKeys), batchOf(again, indexKeys)), index, threads)
      assertSame(index.seal(), reference, crowded ++ spread.take(300), random)
    }
  }

  for (form <- Forms) test(s"keys read from real delete files as ${form.describe}, scoped and global, give the hashed index their rows " +
      "give; a key in no form, in the other, or NULL gives none") {
    val spark = TestSpark.session
    val tables = new IcebergTables(spark, s"two_long_columns_${form.id}")
    import spark.implicits._
    val random = new Random(9)
    val keys = IndexedSeq.tabulate(80)(i => if (form == TwoLongKeyForm.Uuid) randomUuid(random) else s"k\u00e9-${i * 7919}")
    def table(extra: Seq[(java.lang.Long, String, Int)]) = {
      val table = tables.create(partitioned = true)
      tables.insert(table, keys.indices.map(i => (i.toLong, keys(i), i % 2)))
      val deleted = keys.indices.filter(_ % 3 == 0).map(i => (i.toLong, keys(i), i % 2))
      tables.delete(table, Seq("v"), deleted.toDF("k", "v", "p"))                                      // scoped, one file a partition
      tables.delete(table, Seq("v"), deleted.take(6).map(r => (r._1, r._2, 0)).toDF("k", "v", "p"), global = true)
      if (extra.nonEmpty) tables.delete(table, Seq("v"), extra.toDF("k", "v", "p"))
      val iceberg = IcebergSparkTables.load(spark, table)
      iceberg.refresh()
      (iceberg, DeletePlanner.plan(iceberg, iceberg.currentSnapshot().snapshotId(), iceberg.schema()).get.deleteSets.head)
    }
    def reading(iceberg: org.apache.iceberg.Table, set: eqdelete.planning.EqualityDeleteSet) = {
      val reader = new DeleteRowReader(iceberg.io(), iceberg.schema(), set.equalityIds)
      val files = set.files.map(f => TaskFile(f.file, f.scope.toLong, f.sequenceNumber))
      val fromRows = new HashedKeyIndex(Seq(StringType), set.records)
      for (file <- files; row <- reader.read(file.file)) fromRows.add(file.scope, Array[Any](row.getUTF8String(0)), file.sequenceNumber)
      (reader, files, fromRows.seal())
    }

    val (inForm, inFormSet) = table(Nil)
    val (reader, files, fromRows) = reading(inForm, inFormSet)
    assert(files.map(_.scope).toSet.size == 3)
    val batch = DeleteRowBatch.ofTwoLongKeyColumns(files.iterator, reader, inFormSet.records, 4)
    assert(batch.exists(b => b.inTwoLongs && b.form == form))
    val index = new TwoLongKeyIndex(inFormSet.records, form)
    DeleteRowBatch.addAll(Seq(batch.get), index, 2)
    assertSame(index.seal(), fromRows, keys, random)
    // Another task's key was in no form: this one's keys go to the hashed index as their strings.
    val hashed = new HashedKeyIndex(Seq(StringType), inFormSet.records)
    DeleteRowBatch.addAll(Seq(DeleteRowBatch.asHashed(batch.get, Seq(StringType), inFormSet.records)), hashed, 2)
    hashed.seal()
    for (scope <- Seq(0L, 1L, 7L); key <- keys) {
      assert(hashed.newestOf(scope, Array[Any](utf8(key))) == fromRows.newestOf(scope, Array[Any](utf8(key))), s"$key in $scope")
    }

    val others = if (form == TwoLongKeyForm.Uuid) Seq(keys(2).toUpperCase, "key-2") else Seq("sixteen bytes...", randomUuid(random))
    (null +: others).foreach { odd =>
      // In one file with a key in form: a file of NULLs alone is never planned against files without NULLs.
      val (other, otherSet) = table(Seq((2L, odd, 1), (3L, keys(3), 1)))
      val (otherReader, otherFiles, otherRows) = reading(other, otherSet)
      assert(DeleteRowBatch.ofTwoLongKeyColumns(otherFiles.iterator, otherReader, otherSet.records, 4).isEmpty, String.valueOf(odd))
      val fallback = DeleteRowBatch.ofTwoLongOrHashedKeyColumns(otherFiles.iterator, otherReader, Seq(StringType), otherSet.records, 4)
      assert(!fallback.inTwoLongs)
      val fromFallback = new HashedKeyIndex(Seq(StringType), otherSet.records)
      DeleteRowBatch.addAll(Seq(fallback), fromFallback, 1)
      fromFallback.seal()
      assert(fromFallback.distinctKeys == otherRows.distinctKeys)
      for (scope <- Seq(0L, 1L); key <- (keys :+ null) ++ others) {
        assert(fromFallback.newestOf(scope, Array[Any](utf8(key))) == otherRows.newestOf(scope, Array[Any](utf8(key))), s"$key in $scope")
      }
    }
  }
}
