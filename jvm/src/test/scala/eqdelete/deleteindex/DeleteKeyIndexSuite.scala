package eqdelete.deleteindex

import scala.util.Random

import eqdelete.planning.ScanDeletes

import org.apache.spark.sql.types.{BinaryType, BooleanType, DataType, DateType, Decimal, DecimalType, DoubleType, FloatType, IntegerType, LongType, StringType, TimestampType}
import org.apache.spark.unsafe.types.UTF8String
import org.scalatest.funsuite.AnyFunSuite

/** The key indexes against a reference map: (scope, key) -> newest sequence number. */
class DeleteKeyIndexSuite extends AnyFunSuite {

  private val Global = ScanDeletes.GlobalScope.toLong
  /** The newest sequence number of the sets indexed here (the random rows' are at most 20). */
  private val Newest = 20L

  /** Reference: the newest delete of `key` in `scope` or globally. */
  private def expected(deletes: Seq[(Long, Seq[Any], Long)], scope: Long, key: Seq[Any]): Long = {
    // Iceberg's equality is Java's: NaN equals NaN, -0.0 is not 0.0 (Scala's == on numbers differs).
    def same(a: Seq[Any], b: Seq[Any]) = a.zip(b).forall {
      case (x: Array[Byte], y: Array[Byte]) => java.util.Arrays.equals(x, y)
      case (null, null) => true
      case (null, _) | (_, null) => false
      case (x: AnyRef, y: AnyRef) => x.equals(y)
      case (x, y) => x == y
    }
    val matching = deletes.collect { case (s, k, seq) if (s == scope || s == Global) && same(k, key) => seq }
    if (matching.isEmpty) DeleteKeyIndex.NoDelete else matching.max
  }

  private def newest(index: DeleteKeyIndex, scope: Long, key: Seq[Any]): Long = index.newestOf(scope, key.toArray)

  private def check(types: Seq[DataType], value: Random => Any, deletes: Int, expectedKeys: Long, seed: Long): Unit =
    check(types, (r: Random, _: DataType) => value(r), deletes, expectedKeys, seed)

  /** Random delete rows against the reference, each column's values from `value` for its type. */
  private def check(types: Seq[DataType], value: (Random, DataType) => Any, deletes: Int, expectedKeys: Long, seed: Long): Unit = {
    val random = new Random(seed)
    val scopes = Seq(Global, 0L, 1L, 2L)
    val rows = Seq.fill(deletes)((scopes(random.nextInt(4)), types.map(t => value(random, t)), 1L + random.nextInt(20)))
    val index = DeleteKeyIndex.forKeyTypes(types, expectedKeys, Newest)
    rows.foreach { case (s, k, seq) => index.add(s, k.toArray, seq) }
    index.seal()
    val probes = rows.map(r => (r._1, r._2)) ++ Seq.fill(deletes)((scopes(random.nextInt(4)), types.map(t => value(random, t))))
    probes.foreach { case (scope, key) =>
      // A row's scope is never global; global deletes still reach it.
      val rowScope = if (scope == Global) 0L else scope
      assert(newest(index, rowScope, key) == expected(rows, rowScope, key), s"key $key in scope $rowScope")
    }
  }

  test("one long key: primitive table, NULLs, scopes, newest sequence number") {
    assert(DeleteKeyIndex.forKeyTypes(Seq(LongType), 10, Newest).isInstanceOf[LongKeyIndex])
    check(Seq(LongType), r => if (r.nextInt(10) == 0) null else java.lang.Long.valueOf(r.nextInt(500) - 250), 2000, 2000, 1)
  }

  test("the primitive table grows past the keys it was sized for") {
    check(Seq(LongType), r => java.lang.Long.valueOf(r.nextLong()), 5000, 1, 2)
  }

  test("a sealed index's Bloom filter never hides a key, over many keys") {
    val index = new LongKeyIndex(100000)
    (0L until 100000L).foreach(k => index.add(0, Array[Any](k * 7919L), 5))
    index.seal()
    assert((0L until 100000L).forall(k => index.newest(0, isNull = false, k * 7919L) == 5))
    assert((0L until 100000L).count(k => index.newest(0, isNull = false, k * 7919L + 1) != DeleteKeyIndex.NoDelete) == 0)
  }

  test("a sealed index's bitmap of a dense key range is exact, at its edges and for keys far outside it") {
    def probes(keys: Seq[Long]): Seq[Long] =
      keys.flatMap(k => Seq(k - 1, k, k + 1)) ++ Seq(Long.MinValue, Long.MinValue + 1, -1L, 0L, 1L, Long.MaxValue - 1, Long.MaxValue)
    val reference = (keys: Seq[Long], probe: Long) => if (keys.contains(probe)) 4L else DeleteKeyIndex.NoDelete
    // Dense (every other id past the Bloom filter's size, negative, at the long range's ends), and spanning every long.
    val sets = Seq(
      (3000000L until 3000000L + 2 * 2500000L by 2L).toSeq,
      (-500L until 500L).toSeq,
      (Long.MaxValue - 99L to Long.MaxValue).toSeq,
      (Long.MinValue to Long.MinValue + 99L).toSeq,
      Seq(Long.MinValue, 0L, Long.MaxValue))
    for (keys <- sets) {
      val index = new LongKeyIndex(keys.size)
      keys.foreach(k => index.add(DeleteKeyIndex.GlobalScope, Array[Any](k), 4))
      index.seal()
      val checked = if (keys.size > 10000) probes(keys.take(500) ++ keys.takeRight(500)) ++ (0 until 200000).map(i => 3000000L + i) else probes(keys)
      checked.foreach(p => assert(index.newest(0, isNull = false, p) == reference(keys, p), s"$p"))
    }
  }

  test("int and date keys use the primitive table") {
    Seq(IntegerType, DateType).foreach(t => assert(DeleteKeyIndex.forKeyTypes(Seq(t), 1, Newest).isInstanceOf[LongKeyIndex]))
    check(Seq(IntegerType), r => if (r.nextInt(8) == 0) null else Integer.valueOf(r.nextInt(300)), 1000, 1000, 3)
  }

  test("hashed keys: many keys, table growth, and hash collisions confirmed against the stored key") {
    // Sized for 1 key: the table grows; the keys share few hash values only by chance, so the
    // stored keys decide.
    check(Seq(StringType), r => UTF8String.fromString(s"key-${r.nextInt(5000)}"), 4000, 1, 10)
    val index = new HashedKeyIndex(Seq(StringType), 4)
    index.add(0, Array[Any](UTF8String.fromString("a")), 3)
    index.seal()
    val other = index.pack(Array[Any](UTF8String.fromString("b")))
    // The same hash as "a" but another key: never a delete.
    assert(index.newest(0, KeyHash.of(Array[Any](UTF8String.fromString("a"))), other) == DeleteKeyIndex.NoDelete)
    // A key that is a prefix of the stored one is another key too.
    assert(index.newest(0, KeyHash.of(Array[Any](UTF8String.fromString("a"))), index.pack(Array[Any](UTF8String.fromString(""))))
      == DeleteKeyIndex.NoDelete)
  }

  test("hashed keys looked up together (newestAll) find what one at a time finds, with and without a Bloom filter") {
    val types = Seq(IntegerType, StringType)
    val random = new Random(21)
    def key(): Array[Any] = Array(if (random.nextInt(10) == 0) null else Integer.valueOf(random.nextInt(20)),
      if (random.nextInt(10) == 0) null else UTF8String.fromString(s"s${random.nextInt(50)}"))
    // Global and scoped deletes, global only, scoped only.
    for (scopes <- Seq(Seq(Global, 0L, 1L), Seq(Global), Seq(0L, 1L)); withBloom <- Seq(false, true)) {
      val rows = Seq.fill(600)((scopes(random.nextInt(scopes.size)), key(), 1L + random.nextInt(20)))
      val index = new HashedKeyIndex(types, 16, maxBloomKeys = if (withBloom) HashedKeyIndex.MaxBloomKeys else 0L)
      rows.foreach { case (s, k, seq) => index.add(s, k, seq) }
      index.seal()
      // With no Bloom filter every hash may be there; with one, most of those never added are not.
      val rejected = (1 to 100).count(h => !index.mightContain(h * 0x9E3779B97F4A7C15L))
      assert(if (withBloom) rejected > 50 else rejected == 0, s"$rejected of 100 hashes rejected")
      val probes = rows.map(_._2) ++ Seq.fill(600)(key())
      val packed = new KeyBytes
      val offsets = new Array[Int](probes.size + 1)
      probes.zipWithIndex.foreach { case (k, i) => offsets(i) = packed.length; types.zip(k).foreach { case (t, v) => packed.put(t, v) } }
      offsets(probes.size) = packed.length
      val hashes = probes.map(KeyHash.of).toArray
      // A data row's scope is never global, but newestAll is asked for it too.
      for (scope <- Seq(Global, 0L, 1L, 2L)) {
        val (out, entries) = (new Array[Long](probes.size), new Array[Long](probes.size))
        index.newestAll(scope, hashes, packed.bytes, offsets, probes.size, out, entries)
        probes.zipWithIndex.foreach { case (k, i) =>
          assert(out(i) == index.newestOf(scope, k), s"key ${k.toSeq} in scope $scope, deletes in scopes $scopes")
          assert(out(i) == expected(rows.map(r => (r._1, r._2.toSeq, r._3)), scope, k.toSeq), s"key ${k.toSeq} in scope $scope")
        }
      }
    }
  }

  test("string keys: hashed index, NULL equal to NULL") {
    check(Seq(StringType), r => if (r.nextInt(10) == 0) null else UTF8String.fromString(s"k${r.nextInt(300)}"), 1000, 1000, 4)
  }

  test("multi-column keys: every column must match") {
    check(Seq(IntegerType, StringType), (r, t) =>
      if (r.nextInt(10) == 0) null else if (t == IntegerType) Integer.valueOf(r.nextInt(10)) else UTF8String.fromString(s"s${r.nextInt(3)}"),
      1000, 1000, 5)
  }

  test("multi-column keys of every packed type: booleans, decimals narrow and wide, binary, timestamps") {
    val types = Seq(BooleanType, DecimalType(10, 2), DecimalType(30, 4), BinaryType, TimestampType)
    check(types, (r, t) => if (r.nextInt(10) == 0) null else t match {
      case BooleanType => java.lang.Boolean.valueOf(r.nextBoolean())
      case d: DecimalType => Decimal(BigDecimal(r.nextInt(3)) / 4, d.precision, d.scale)
      case BinaryType => Array.fill[Byte](r.nextInt(3))(1)
      case _ => java.lang.Long.valueOf(r.nextInt(3))
    }, 1000, 1000, 10)
  }

  test("a decimal compares by value whatever scale it carries") {
    val index = DeleteKeyIndex.forKeyTypes(Seq(DecimalType(10, 2), StringType), 4, Newest)
    index.add(0, Array[Any](Decimal(BigDecimal("1.50"), 10, 2), UTF8String.fromString("a")), 3)
    index.seal()
    assert(index.newestOf(0, Array[Any](Decimal(BigDecimal("1.5"), 10, 1), UTF8String.fromString("a"))) == 3)
    assert(index.newestOf(0, Array[Any](Decimal(BigDecimal("1.51"), 10, 2), UTF8String.fromString("a"))) == DeleteKeyIndex.NoDelete)
  }

  test("binary keys compare by content") {
    check(Seq(BinaryType), r => if (r.nextInt(10) == 0) null else Array[Byte](r.nextInt(20).toByte), 500, 500, 6)
  }

  test("double and float keys: the primitive table, with Java's equality") {
    Seq(DoubleType, FloatType).foreach(t => assert(DeleteKeyIndex.forKeyTypes(Seq(t), 1, Newest).isInstanceOf[LongKeyIndex]))
    val doubles = Seq(0.0, -0.0, Double.NaN, java.lang.Double.longBitsToDouble(0x7ff8000000000123L), 1.5, Double.NegativeInfinity)
    check(Seq(DoubleType), r => if (r.nextInt(10) == 0) null else java.lang.Double.valueOf(doubles(r.nextInt(doubles.size))),
      500, 500, 7)
    check(Seq(FloatType), r => if (r.nextInt(10) == 0) null else java.lang.Float.valueOf(Seq(0.0f, -0.0f, Float.NaN, 3f)(r.nextInt(4))),
      500, 500, 8)
    check(Seq(DoubleType, StringType), (r, t) => if (t == DoubleType) java.lang.Double.valueOf(doubles(r.nextInt(doubles.size)))
      else UTF8String.fromString(s"s${r.nextInt(2)}"), 500, 500, 9)
  }

  test("a sequence number of 0 is refused: no delete file has it") {
    val index = DeleteKeyIndex.forKeyTypes(Seq(LongType), 1, Newest)
    assertThrows[IllegalArgumentException](index.add(0, Array[Any](1L), 0))
  }

  test("size estimates cover the tables actually allocated") {
    // The primitive table (with and without its Bloom filter), as shipped to executors.
    Seq(100000, 3000000).foreach { keys =>
      val longs = DeleteKeyIndex.forKeyTypes(Seq(LongType), keys, Newest)
      (0 until keys).foreach(k => longs.add(-1, Array[Any](k.toLong * 31), 1))
      longs.seal()
      val shipped = new java.io.ByteArrayOutputStream()
      new java.io.ObjectOutputStream(shipped).writeObject(longs)
      assert(shipped.size() <= DeleteKeyIndex.estimatedBytes(Seq(LongType), keys, Newest), s"$keys keys: ${shipped.size()}")
    }
    // The hashed table, as shipped to executors: keys of up to 24 bytes stay within the estimate.
    Seq(Seq(StringType), Seq(LongType, StringType, DateType)).foreach { types =>
      val keys = 1000
      val index = DeleteKeyIndex.forKeyTypes(types, keys, Newest)
      (0 until keys).foreach { k =>
        index.add(0, types.map {
          case StringType => UTF8String.fromString(s"a-key-of-24-bytes-${100000 + k}")
          case _ => java.lang.Long.valueOf(k)
        }.toArray, 1)
      }
      index.seal()
      val shipped = new java.io.ByteArrayOutputStream()
      new java.io.ObjectOutputStream(shipped).writeObject(index)
      assert(shipped.size() <= DeleteKeyIndex.estimatedBytes(types, keys, Newest), s"$types: ${shipped.size()} > ${DeleteKeyIndex.estimatedBytes(types, keys, Newest)}")
    }
  }

  test("keys beyond what one index holds fail with IndexCapacityException, not a wrong index") {
    val index = new HashedKeyIndex(Seq(StringType), 4, maxRecordBytes = 1000)
    val error = intercept[IndexCapacityException] {
      (0 until 100).foreach(k => index.add(0, Array[Any](UTF8String.fromString(s"key-$k")), 1))
    }
    assert(error.getMessage.contains("more than one index holds"))
  }

  test("a sealed index ships its records without spare room, whichever serializer Spark uses") {
    val index = new HashedKeyIndex(Seq(StringType), 1000) // sized for 1,000 keys, given 3
    (0 until 3).foreach(k => index.add(0, Array[Any](UTF8String.fromString(s"k$k")), 1))
    index.seal()
    val kryo = new org.apache.spark.serializer.KryoSerializer(new org.apache.spark.SparkConf()).newInstance()
    val shipped = kryo.deserialize[HashedKeyIndex](kryo.serialize(index))
    (0 until 4).foreach { k =>
      assert(shipped.newestOf(0, Array[Any](UTF8String.fromString(s"k$k"))) == (if (k < 3) 1 else DeleteKeyIndex.NoDelete))
    }
    assert(kryo.serialize(index).limit() < 20000)
  }

  test("covers: the same key, as new or newer, in the row's scope or globally") {
    Seq(Seq(LongType), Seq(StringType)).foreach { types =>
      def key(n: Long): Any = if (types.head == LongType) n else UTF8String.fromString(s"k$n")
      val index = DeleteKeyIndex.forKeyTypes(types, 4, Newest)
      index.add(3, Array(key(1)), 10)     // scoped to 3
      index.add(Global, Array(key(2)), 10)
      index.add(3, Array[Any](null), 10)  // NULL equals NULL
      index.seal()
      // (scope, key, sequence number of the row checked, covered)
      val cases = Seq(
        (3L, key(1), 10L, true), (3L, key(1), 9L, true), (3L, key(1), 11L, false), (4L, key(1), 5L, false),
        (Global, key(1), 5L, false), (4L, key(2), 10L, true), (Global, key(2), 10L, true), (3L, key(3), 1L, false),
        (3L, null, 10L, true), (4L, null, 1L, false))
      cases.foreach { case (scope, k, seq, covered) =>
        assert(index.covers(scope, Array(k), seq) == covered, s"$types: ($scope, $k, $seq)")
      }
    }
  }

  test("the primitive table packs scope and sequence number: every int scope, sequence numbers up to 2^32 - 1") {
    val index = new LongKeyIndex(8)
    val max = LongKeyIndex.MaxSequenceNumber
    index.add(Int.MaxValue, Array[Any](1L), max)
    index.add(Int.MinValue, Array[Any](1L), 7)
    index.add(Global, Array[Any](2L), max - 1)
    index.add(Int.MaxValue, Array[Any](1L), 3) // older: the newest stays
    index.seal()
    assert(index.newest(Int.MaxValue, isNull = false, 1L) == max)
    assert(index.newest(Int.MinValue, isNull = false, 1L) == 7)
    assert(index.newest(0, isNull = false, 1L) == DeleteKeyIndex.NoDelete)
    assert(index.newest(Int.MaxValue, isNull = false, 2L) == max - 1)
    assert(intercept[IndexCapacityException](new LongKeyIndex(1).add(0, Array[Any](1L), max + 1)).getMessage.contains("past"))
  }

  test("a set with sequence numbers past what the primitive table packs gets the general index, and is exact") {
    val past = LongKeyIndex.MaxSequenceNumber + 10
    assert(!DeleteKeyIndex.isPrimitive(Seq(LongType), past))
    val index = DeleteKeyIndex.forKeyTypes(Seq(LongType), 4, past)
    assert(index.isInstanceOf[HashedKeyIndex])
    index.add(0, Array[Any](5L), past)
    index.add(Global, Array[Any](6L), 1L << 40)
    index.seal()
    assert(index.newestOf(0, Array[Any](5L)) == past)
    assert(index.newestOf(1, Array[Any](6L)) == (1L << 40))
    assert(index.newestOf(1, Array[Any](5L)) == DeleteKeyIndex.NoDelete)
  }
}
