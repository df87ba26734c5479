package eqdelete.deleteindex.build

import scala.util.Random

import eqdelete.deleteindex.{DeleteKeyIndex, HashedKeyIndex, IndexCapacityException, InlineKeyIndex, KeyBytes, KeyHash}
import eqdelete.planning.ScanDeletes

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.types.{DataType, DateType, LongType, StringType}
import org.apache.spark.unsafe.types.UTF8String
import org.scalatest.funsuite.AnyFunSuite

/**
 * Short packed keys held in the slots: the same newest delete for every key as the hashed index
 * of the same rows, added one by one or from tasks' batches (ordered for the hashed table) on
 * several threads, NULL parts, trailing zero bytes and keys longer than the slots included.
 */
class InlineKeyIndexSuite extends AnyFunSuite {

  private val Global = ScanDeletes.GlobalScope.toLong
  private val Composite: Seq[DataType] = Seq(LongType, StringType, DateType)

  private def string(random: Random): UTF8String =
    if (random.nextInt(12) == 0) null
    else UTF8String.fromString(Seq("k", "k\u0000", "key-", "x\u0000\u0000")(random.nextInt(4)) + random.nextInt(300))

  /** A key of `types`: a string key or (long, string, date), NULL parts included. */
  private def key(types: Seq[DataType], random: Random): Seq[Any] = types.map {
    case StringType => string(random)
    case LongType => if (random.nextInt(12) == 0) null else java.lang.Long.valueOf(random.nextInt(50) * 10000000000L)
    case DateType => if (random.nextInt(12) == 0) null else Integer.valueOf(random.nextInt(30))
  }

  private def rows(types: Seq[DataType], random: Random, n: Int): Seq[(Seq[Any], Long, Long)] =
    Seq.fill(n)((key(types, random), Seq(Global, 0L, 1L, Int.MaxValue.toLong)(random.nextInt(4)), 1L + random.nextInt(9)))

  private def hashedOf(types: Seq[DataType], deletes: Seq[(Seq[Any], Long, Long)]): HashedKeyIndex = {
    val index = new HashedKeyIndex(types, deletes.size)
    deletes.foreach { case (k, scope, seq) => index.add(scope, k.toArray, seq) }
    index.seal()
  }

  private def widthOf(types: Seq[DataType], deletes: Seq[(Seq[Any], Long, Long)]): Int =
    InlineKeyIndex.widthFor(deletes.map(d => KeyBytes.pack(types.toArray, d._1.toArray, new KeyBytes).length).max).get

  /** Asserts `index` gives `reference`'s newest delete of every probe in every scope, one by one and together. */
  private def assertSame(types: Seq[DataType], index: InlineKeyIndex, reference: DeleteKeyIndex, probes: Seq[Seq[Any]]): Unit = {
    assert(index.distinctKeys == reference.distinctKeys)
    val typeArray = types.toArray
    for (scope <- Seq(Global, 0L, 1L, 2L, Int.MaxValue.toLong)) {
      val expected = probes.map(p => reference.newestOf(scope, p.toArray))
      probes.zip(expected).foreach { case (p, e) => assert(index.newestOf(scope, p.toArray) == e, s"${p.mkString(", ")} in $scope") }
      // The keys packed one after the other, as a batch's lookup packs them.
      val packed = new java.io.ByteArrayOutputStream()
      val offsets = new Array[Int](probes.size + 1)
      val hashes = probes.indices.map { i =>
        offsets(i) = packed.size
        val key = KeyBytes.pack(typeArray, probes(i).toArray, new KeyBytes)
        packed.write(key.bytes, 0, key.length)
        KeyHash.of(probes(i).toArray)
      }.toArray
      offsets(probes.size) = packed.size
      val out = new Array[Long](probes.size)
      index.newestAll(scope, hashes, packed.toByteArray, offsets, probes.size, out, new Array[Long](probes.size))
      assert(out.toSeq == expected, s"all together in $scope")
    }
  }

  Seq(Seq(StringType), Composite).foreach { types =>
    test(s"${types.mkString(", ")} keys added one by one give the hashed index's newest deletes; longer keys none") {
      (0 until 3).foreach { seed =>
        val random = new Random(seed)
        val deletes = rows(types, random, 3000)
        val width = widthOf(types, deletes)
        val index = new InlineKeyIndex(types, deletes.size, width)
        deletes.foreach { case (k, scope, seq) => index.add(scope, k.toArray, seq) }
        val longer = types.map {
          case StringType => UTF8String.fromString("a key longer than any slot holds, by far")
          case LongType => java.lang.Long.valueOf(1L)
          case DateType => Integer.valueOf(1)
        }
        val probes = deletes.map(_._1) ++ Seq.fill(500)(key(types, random)) :+ longer
        assertSame(types, index.seal(), hashedOf(types, deletes), probes)
      }
    }
  }

  test("an inline index refuses a key longer than its slots and more keys than it was sized for") {
    val index = new InlineKeyIndex(Seq(StringType), 2, 1)
    intercept[IllegalArgumentException](index.add(Global, Array[Any](UTF8String.fromString("longer than 3 bytes")), 1L))
    val small = new InlineKeyIndex(Seq(LongType), 2, 2)
    intercept[IndexCapacityException]((0 until 600).foreach(i => small.add(Global, Array[Any](java.lang.Long.valueOf(i)), 1L)))
    intercept[IndexCapacityException](new InlineKeyIndex(Seq(LongType), 2, 2).add(Global, Array[Any](1L), InlineKeyIndex.MaxSequenceNumber + 1))
  }

  /** One task's batch of `deletes` (runs as they come), packed and ordered for a hashed index of `indexKeys`. */
  private def batchOf(types: Seq[DataType], deletes: Seq[(Seq[Any], Long, Long)], indexKeys: Long): DeleteRowBatch =
    DeleteRowBatch(deletes.iterator.map { case (k, s, q) => InternalRow.fromSeq(k ++ Seq(s, q)) }, types, primitive = false, indexKeys)

  test("tasks' batches filled on one thread and on several, the table past the Bloom filter's size, give the keys added one by one") {
    val random = new Random(5)
    val deletes = rows(Composite, random, 40000)
    val tasks = deletes.grouped(6000).map(_.sortBy(d => (d._2, d._3))).toSeq
    val reference = hashedOf(Composite, deletes)
    val width = widthOf(Composite, deletes)
    for (indexKeys <- Seq(deletes.size.toLong, 2500000L); threads <- Seq(1, 2, 3)) {
      val index = new InlineKeyIndex(Composite, indexKeys, width)
      // Ordered for this size they fill regions on threads; for another size, one thread.
      val batches = tasks.map(task => batchOf(Composite, task, if (threads == 3) indexKeys + 1 else indexKeys))
      assert(batches.map(_.longestKey).max <= 8 * width)
      DeleteRowBatch.addAll(batches, index, threads)
      assertSame(Composite, index.seal(), reference, deletes.map(_._1).distinct.take(3000) ++ Seq.fill(300)(key(Composite, random)))
    }
  }

  test("keys whose probe leaves their thread's region, or wraps past the table's end, are added once, their duplicates' newest sequence number kept") {
    val indexKeys = 2500000L
    val types = Seq(StringType)
    val probe = new InlineKeyIndex(types, indexKeys, 3)
    // 150 keys homed in the last stretch of the first of two regions (about 76 slots here) and
    // 150 in the table's last: their probes run past the region's end, or the table's.
    def homedIn(stretch: Int): Seq[Seq[Any]] = Iterator.from(0).map(i => Seq[Any](UTF8String.fromString(s"c$stretch-$i")))
      .filter(k => probe.stretchOf(KeyHash.of(k.toArray), Global) == stretch).take(150).toSeq
    val crowded = homedIn(HashedKeyIndex.Stretches / 2 - 1) ++ homedIn(HashedKeyIndex.Stretches - 1)
    val random = new Random(13)
    val spread = Seq.fill(5000)(Seq[Any](UTF8String.fromString(s"s${random.nextInt()}")))
    val first = (crowded ++ spread).map(k => (k, Global, 2L))
    val again = (crowded.filter(_ => random.nextBoolean()) ++ spread.take(100)).map(k => (k, Global, 5L))
    val reference = hashedOf(types, first ++ again)
    for (threads <- Seq(1, 2)) {
      val index = new InlineKeyIndex(types, indexKeys, 3)
      DeleteRowBatch.addAll(Seq(batchOf(types, first, indexKeys), batchOf(types, again, indexKeys)), index, threads)
      assertSame(types, index.seal(), reference, crowded ++ spread.take(300))
    }
  }
}
