package eqdelete.index

import scala.util.Random

import org.apache.spark.SparkConf
import org.apache.spark.serializer.{JavaSerializer, KryoSerializer}
import org.scalatest.funsuite.AnyFunSuite

/** The key bitmap against a reference set of keys, built from parts as read tasks ship them. */
class KeyBitmapIndexSuite extends AnyFunSuite {

  private val Oldest = 7L
  private def part(keys: Seq[Long], nulls: Boolean = false) = KeyBitmapIndex.Part.of(keys.toArray, keys.size, nulls)
  private def present(index: KeyBitmapIndex, key: Long) = index.newest(-1L, isNull = false, key) != DeleteKeyIndex.NoDelete

  test("parts of dense and of sparse keys make one exact index, at the range's edges and far outside it") {
    val random = new Random(19)
    for ((lower, upper) <- Seq((0L, 9999L), (-5000L, 4999L), (17L, 80L), (Long.MinValue, Long.MinValue + 3000),
        (Long.MaxValue - 3000, Long.MaxValue))) {
      val span = (upper - lower).toInt + 1
      val keys = (Seq(lower, upper) ++ Seq.fill(span / 3)(lower + random.nextInt(span))).distinct
      // Tasks of a contiguous stretch each (bitmaps), and of keys spread thinly (kept as keys).
      val (dense, sparse) = keys.partition(k => (k - lower) < span / 2)
      val parts = dense.grouped(400).map(part(_)).toSeq ++ sparse.grouped(3).map(part(_))
      if (span > 1000) assert(parts.exists(_.words.nonEmpty) && parts.exists(_.keys.nonEmpty), s"$lower .. $upper: both kinds of part")
      val index = KeyBitmapIndex.of(lower, upper, Oldest, parts, "(k)")
      val expected = keys.toSet
      val probes = (lower - 130 to lower + 200).filter(_ <= upper) ++ (upper - 200 to upper + 130).filter(_ >= lower) ++
        Seq(Long.MinValue, Long.MaxValue, 0L, -1L, lower - 64, upper + 64) ++ Seq.fill(2000)(lower + random.nextInt(span))
      probes.foreach { key =>
        val inRange = key >= lower && key <= upper
        assert(present(index, key) == (inRange && expected.contains(key)), s"key $key of $lower .. $upper")
      }
      assert(index.distinctKeys == expected.size)
    }
  }

  test("a task ships a bitmap of its keys' range, or the keys where they are sparser than 64 bits a key") {
    val dense = part(0L until 10000L by 3)
    assert(dense.keys.isEmpty && dense.words.length == 157 && dense.first == 0)
    val shifted = part(Seq(-70L, -3L))
    assert(shifted.keys.isEmpty && shifted.first == -128L && shifted.words.length == 2)
    val sparse = part(Seq(5L, 1000000L, 77L))
    assert(sparse.words.isEmpty && sparse.keys.toSeq == Seq(5L, 1000000L, 77L))
    val wide = part(Seq(Long.MinValue, Long.MaxValue))
    assert(wide.words.isEmpty && wide.keys.length == 2)
    val empty = part(Nil, nulls = true)
    assert(empty.words.isEmpty && empty.keys.isEmpty && empty.nullDeleted)
  }

  test("newest is the oldest delete file's sequence number for a key present, NULL only where a task saw one") {
    val withoutNull = KeyBitmapIndex.of(0, 99, Oldest, Seq(part(Seq(3L, 50L))), "(k)")
    assert(withoutNull.newestOf(0, Array[Any](3L)) == Oldest)
    assert(withoutNull.newestOf(0, Array[Any](4L)) == DeleteKeyIndex.NoDelete)
    assert(withoutNull.newestOf(0, Array[Any](null)) == DeleteKeyIndex.NoDelete)
    assert(!withoutNull.hasScoped)
    val withNull = KeyBitmapIndex.of(0, 99, Oldest, Seq(part(Seq(3L)), part(Nil, nulls = true)), "(k)")
    assert(withNull.newestOf(4, Array[Any](null)) == Oldest)
    assert(withNull.distinctKeys == 2)
    // int and date keys come as Integers
    assert(withoutNull.newestOf(1, Array[Any](Integer.valueOf(50))) == Oldest)
  }

  test("covers: a delete row as old as the bitmap's oldest delete or older, of a key present") {
    val index = KeyBitmapIndex.of(0, 99, Oldest, Seq(part(Seq(3L))), "(k)")
    assert(index.covers(2, Array[Any](3L), Oldest))
    assert(index.covers(2, Array[Any](3L), 1))
    assert(!index.covers(2, Array[Any](3L), Oldest + 1)) // may be newer than the key's newest delete
    assert(!index.covers(2, Array[Any](4L), 1))
  }

  test("a key outside the bounds the delete files' metadata states fails, naming the key, the set and the bounds") {
    Seq(part(Seq(10L, 100L)), part(Seq(10L, 5000000L)), part(Seq(-1L, 10L))).foreach { outside =>
      val error = intercept[IllegalStateException](KeyBitmapIndex.of(0, 99, Oldest, Seq(part(Seq(1L)), outside), "(id)"))
      assert(error.getMessage.contains("(id)") && error.getMessage.contains("0 .. 99"), error.getMessage)
      assert(Seq("100", "5000000", "-1").exists(error.getMessage.contains))
    }
  }

  test("the index and its parts ship whole with Java's and Kryo's serializers") {
    val conf = new SparkConf()
    val keys = (0L until 5000L by 7) :+ 4999L
    val index = KeyBitmapIndex.of(0, 4999, Oldest, Seq(part(keys.take(300)), part(keys.drop(300)), part(Nil, nulls = true)), "(k)")
    for (serializer <- Seq(new JavaSerializer(conf).newInstance(), new KryoSerializer(conf).newInstance())) {
      val shipped = serializer.deserialize[KeyBitmapIndex](serializer.serialize(index))
      (0L until 5000L).foreach(k => assert(present(shipped, k) == keys.contains(k), s"$k after $serializer"))
      assert(shipped.newestOf(0, Array[Any](null)) == Oldest && shipped.distinctKeys == index.distinctKeys)
      val parts = serializer.deserialize[KeyBitmapIndex.Part](serializer.serialize(part(Seq(1L, 2L))))
      assert(parts.words.toSeq == Seq(6L))
    }
  }

  test("bytesFor covers the bitmap allocated") {
    Seq(1L, 64L, 65L, 20000000L).foreach { bits =>
      assert(KeyBitmapIndex.bytesFor(bits) >= 8 * ((bits + 63) / 64))
    }
  }
}
