package eqdelete.deleteindex

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
      // Tasks of a contiguous stretch each (bitmaps), of keys spread over half the range (their
      // distances) and of a few keys spread thinly (kept as keys).
      val (dense, spread) = keys.partition(k => (k - lower) < span / 2)
      val (thin, rest) = spread.splitAt(spread.size / 2)
      val parts = dense.grouped(400).map(part(_)).toSeq ++ rest.sortBy(-_).grouped(rest.size / 2 + 1).map(part(_)) ++
        thin.grouped(3).map(part(_))
      if (span > 1000) {
        assert(parts.exists(_.words.nonEmpty) && parts.exists(_.distances.nonEmpty) && parts.exists(_.keys.nonEmpty),
          s"$lower .. $upper: all three kinds of part")
      }
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

  test("a task ships a bitmap of its keys' range, their distances where fewer bytes, or the keys where sparser than 128 bits a key") {
    def kinds(p: KeyBitmapIndex.Part) = Seq(p.words.nonEmpty, p.distances.nonEmpty, p.keys.nonEmpty)
    val dense = part(0L until 10000L by 3)
    assert(kinds(dense) == Seq(true, false, false) && dense.words.length == 157 && dense.first == 0)
    val shifted = part((-640L until 0L by 2).reverse)
    assert(kinds(shifted) == Seq(true, false, false) && shifted.first == -640L && shifted.words.length == 10)
    // One key in 60 over the range, in any order: one byte a key, where the bitmap takes about 8.
    val spread = part(scala.util.Random.shuffle((64L until 600064L by 60).toList))
    assert(kinds(spread) == Seq(false, true, false) && spread.first == 64L && spread.distances.length == 10000)
    // Distances past 7 bits take more bytes: 128 is two, 2^14 three, the first key's from `first`.
    val near = (-30L until 59970L by 30).toList
    val far = part(near ++ Seq(59940L + 128, 59940L + 128 + 16384))
    assert(kinds(far) == Seq(false, true, false) && far.first == -64L && far.distances.length == 2000 + 2 + 3)
    // A tie: 8 keys in one word take 8 bytes as distances too; the bitmap wins.
    val tie = part(0L until 8L)
    assert(kinds(tie) == Seq(true, false, false) && tie.words.toSeq == Seq(255L))
    // One key in 100 (sparser than 64 bits a key, within 128): walked in a bitmap, shipped as distances.
    val walked = part(scala.util.Random.shuffle((7L until 1000007L by 100).toList))
    assert(kinds(walked) == Seq(false, true, false) && walked.first == 0L && walked.distances.length == 10000)
    val walkedIndex = KeyBitmapIndex.of(0L, 1000006L, Oldest, Seq(walked), "(k)")
    assert(walkedIndex.distinctKeys == 10000 && (0L to 1000010L).forall(k => present(walkedIndex, k) == (k >= 7 && k < 1000007 && (k - 7) % 100 == 0)))
    // One key in 200: past two bitmap words a key, the keys as read.
    val spaced = part((7L until 2000007L by 200).toList)
    assert(kinds(spaced) == Seq(false, false, true) && spaced.keys.length == 10000)
    val sparse = part(Seq(5L, 1000000L, 77L))
    assert(kinds(sparse) == Seq(false, false, true) && sparse.keys.toSeq == Seq(5L, 1000000L, 77L))
    val wide = part(Seq(Long.MinValue, Long.MaxValue))
    assert(kinds(wide) == Seq(false, false, true) && wide.keys.length == 2)
    val empty = part(Nil, nulls = true)
    assert(kinds(empty) == Seq(false, false, false) && empty.nullDeleted)
    for (p <- Seq(dense, shifted, spread, far)) {
      val index = KeyBitmapIndex.of(-1000L, 1000000L, Oldest, Seq(p), "(k)")
      assert(index.distinctKeys == Seq(3334, 320, 10000, 2002)(Seq(dense, shifted, spread, far).indexOf(p)))
    }
    val index = KeyBitmapIndex.of(-64L, 80000L, Oldest, Seq(far), "(k)")
    val farKeys = (near ++ Seq(60068L, 76452L)).toSet
    (-64L to 80000L).foreach(k => assert(present(index, k) == farKeys.contains(k), s"key $k"))
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
    // Every form: distances, keys, and bitmaps (dense keys) reaching past either bound.
    val bitmaps = Seq(part(90L until 110L), part(-10L until 10L))
    assert(bitmaps.forall(p => p.words.nonEmpty && p.distances.isEmpty))
    val outsides = Seq(part(Seq(10L, 100L)), part(Seq(10L, 5000000L)), part(Seq(-1L, 10L))) ++ bitmaps
    outsides.zip(Seq("100", "5000000", "-1", "109", "-10")).foreach { case (outside, key) =>
      val error = intercept[IllegalStateException](KeyBitmapIndex.of(0, 99, Oldest, Seq(part(Seq(1L)), outside), "(id)"))
      assert(error.getMessage.contains("(id)") && error.getMessage.contains("0 .. 99"), error.getMessage)
      assert(error.getMessage.contains(s"holds key $key,"), error.getMessage)
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
      val words = serializer.deserialize[KeyBitmapIndex.Part](serializer.serialize(part(0L until 128L)))
      assert(words.words.toSeq == Seq(-1L, -1L))
      val distances = serializer.deserialize[KeyBitmapIndex.Part](serializer.serialize(part(Seq(1L, 2L))))
      assert(distances.distances.toSeq == Seq[Byte](1, 1))
    }
  }

  test("bytesFor covers the bitmap allocated") {
    Seq(1L, 64L, 65L, 20000000L).foreach { bits =>
      assert(KeyBitmapIndex.bytesFor(bits) >= 8 * ((bits + 63) / 64))
    }
  }
}
