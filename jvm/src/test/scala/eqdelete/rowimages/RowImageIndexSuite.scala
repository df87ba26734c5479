package eqdelete.rowimages

import scala.util.Random

import eqdelete.deleteindex.KeyBytes
import eqdelete.liveindex.LiveKeyStore
import eqdelete.testing.TestSpark

import org.scalatest.funsuite.AnyFunSuite

/**
 * Kept row images against a reference history of versions: a load, then changes of several
 * versions (upserts of hot keys, a key deleted twice, re-inserts), applied twice; lookups at every
 * version give that version's rows; a purge keeps later versions answerable and refuses earlier ones,
 * also once every store was lost here and loaded again from its checkpoint.
 */
class RowImageIndexSuite extends AnyFunSuite {

  private def packed(k: Long): Array[Byte] = {
    val b = new KeyBytes
    if (k % 97 == 0) b.putNull() else b.putLong(k)  // NULL keys among them: one key
    java.util.Arrays.copyOf(b.bytes, b.length)
  }
  private def nullable(k: Long) = if (k % 97 == 0) 0L else k
  private def row(k: Long, v: Int): Array[Byte] = s"$k:$v".getBytes("UTF-8")

  test("lookups at each version find that version's rows, however often changes are applied and after a purge") {
    val sc = TestSpark.session.sparkContext
    val random = new Random(5)
    // The reference: at each version, the live (key, file, position) -> row.
    var live = (0 until 3000).map(i => ((nullable(random.nextInt(1000).toLong), i % 5, i.toLong), row(i, 0))).toMap
    val loaded = live
    val versions = 10L to 60L by 10L
    val states = scala.collection.mutable.LinkedHashMap(5L -> live)
    val changes = versions.map { version =>
      val deleted = Seq.fill(200)(nullable(random.nextInt(1100).toLong)) :+ 7L :+ 7L  // a key twice
      val inserted = Seq.fill(150)(nullable(random.nextInt(1100).toLong)).zipWithIndex.map { case (k, i) =>
        ((k, 100 + version.toInt, i.toLong), row(k, version.toInt))
      } :+ ((7L, 100 + version.toInt, 999L), row(7, version.toInt))  // hot key: upserted every version
      live = live.filter { case ((k, _, _), _) => !deleted.contains(k) } ++ inserted
      states(version) = live
      (version, deleted, inserted)
    }

    val index = RowImageIndex.create(TestSpark.stateFiles(), 3, snapshotEvery = 4)
    try {
      assert(index.load(sc.parallelize(loaded.toSeq.map { case ((k, f, p), r) =>
        (RowImageStore.entry(packed(k), 5L, f, p), RowImageStore.liveValue(r))
      }, 4)) == loaded.size)
      def apply(version: Long, deleted: Seq[Long], inserted: Seq[((Long, Int, Long), Array[Byte])]) =
        index.apply(sc.parallelize(deleted.map(k => (RowImageStore.deleteChange(packed(k), version), Array.emptyByteArray)) ++
          inserted.map { case ((k, f, p), r) => (RowImageStore.insertChange(packed(k), version, f, p), r) }, 3))
      changes.foreach { case (version, deleted, inserted) =>
        val (added, removed) = apply(version, deleted, inserted)
        assert(added == inserted.size)
        assert(removed == states(math.max(version - 10, 5L)).count { case ((k, _, _), _) => deleted.contains(k) })
        assert(apply(version, deleted, inserted) == ((0L, 0L)), s"applied again at $version")
      }
      val keys = (0L until 1100L).map(nullable).distinct
      def lookedUp(version: Long) = index.lookup(sc.parallelize(keys.flatMap(k => Seq(k, k)).map(k =>
        (LiveKeyStore.keyPrefix(packed(k), packed(k).length), (version, k.toInt))), 4)).collect()
        .map { case (k, r) => (k.toLong, new String(r, "UTF-8")) }.sorted.toSeq
      def expected(version: Long) = states(version).toSeq.map { case ((k, _, _), r) => (k, new String(r, "UTF-8")) }.sorted
      states.keys.foreach(version => assert(lookedUp(version) == expected(version), s"at version $version"))
      assert(index.purge(sc, 40L) > 0)
      Seq(40L, 50L, 60L).foreach(version => assert(lookedUp(version) == expected(version), s"at version $version after the purge"))
      def refusesVersion30(): Unit = {
        val refused = intercept[Exception](lookedUp(30L))
        assert(Iterator.iterate[Throwable](refused)(_.getCause).takeWhile(_ != null)
          .exists(e => Option(e.getMessage).exists(_.contains("no longer hold the rows of version 30"))), refused)
      }
      refusesVersion30()
      // Every store lost here: each loads its checkpoint (snapshot, deltas, the purge replayed, its versions kept).
      RowImageStores.drop(index.id)
      Seq(40L, 50L, 60L).foreach(version => assert(lookedUp(version) == expected(version), s"at version $version loaded again"))
      refusesVersion30()
    } finally index.drop(sc)
  }

  test("a removal of one entry, as a sink makes it, removes that row only, once, and a key's entries name their rows") {
    val sc = TestSpark.session.sparkContext
    // Key 3 live three times (two rows alike, in two files), key 4 once.
    val loaded = Seq((3L, 0, 0L, "a"), (3L, 0, 1L, "a"), (3L, 1, 0L, "b"), (4L, 1, 1L, "c"))
    val index = RowImageIndex.create(TestSpark.stateFiles(), 2, snapshotEvery = 4)
    try {
      index.load(sc.parallelize(loaded.map { case (k, f, p, r) =>
        (RowImageStore.entry(packed(k), 5L, f, p), RowImageStore.liveValue(r.getBytes("UTF-8")))
      }, 2))
      def entries(version: Long) = index.entries(sc.parallelize(Seq(3L, 3L, 4L, 8L).map(k => LiveKeyStore.keyPrefix(packed(k),
        packed(k).length)), 2), version).collect().map { case (e, r) =>
        (RowImageStore.fileOf(e), RowImageStore.positionOf(e), new String(r, "UTF-8"), e)
      }.sortBy(e => (e._1, e._2)).toSeq
      val before = entries(5L)
      assert(before.map(e => (e._1, e._2, e._3)) == Seq((0, 0L, "a"), (0, 1L, "a"), (1, 0L, "b"), (1, 1L, "c")))
      // Version 10 removes the second "a" of key 3 by its entry and adds a row of key 3 at (2, 0).
      val changes = Seq((RowImageStore.removeChange(before(1)._4, 10L), Array.emptyByteArray),
        (RowImageStore.insertChange(packed(3L), 10L, 2, 0L), "d".getBytes("UTF-8")))
      assert(index.apply(sc.parallelize(changes, 2)) == ((1L, 1L)))
      assert(index.apply(sc.parallelize(changes, 2)) == ((0L, 0L)), "applied again")
      assert(entries(10L).map(e => (e._1, e._2, e._3)) == Seq((0, 0L, "a"), (1, 0L, "b"), (1, 1L, "c"), (2, 0L, "d")))
      assert(entries(5L).map(e => (e._1, e._2, e._3)) == before.map(e => (e._1, e._2, e._3)), "the older version still answered")
      // An entry added at the removal's version or after is not one it removes.
      val added = entries(10L).find(_._1 == 2).get._4
      assert(index.apply(sc.parallelize(Seq((RowImageStore.removeChange(added, 10L), Array.emptyByteArray)), 1)) == ((0L, 0L)))
    } finally index.drop(sc)
  }
}
