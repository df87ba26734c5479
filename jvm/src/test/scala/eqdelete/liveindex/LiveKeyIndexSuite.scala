package eqdelete.liveindex

import scala.util.Random

import eqdelete.deleteindex.KeyBytes
import eqdelete.state.KeptStateLostException
import eqdelete.testing.TestSpark

import org.apache.spark.SparkException
import org.scalatest.funsuite.AnyFunSuite

/**
 * The distributed index against a reference multimap: a sorted load, adds, removals of found
 * entries, a purge, lookups; the same lookups after every store was lost here (loaded again from
 * its checkpoint: snapshots, deltas and a replayed purge), and after a restore from the saved manifest.
 */
class LiveKeyIndexSuite extends AnyFunSuite {

  private def packed(k: Long): Array[Byte] = {
    val b = new KeyBytes
    if (k % 97 == 0) b.putNull() else b.putLong(k)  // NULL keys among them: one key, NULL-safe
    java.util.Arrays.copyOf(b.bytes, b.length)
  }

  /** The newest manifest saved under `files`, its stores not loaded. */
  private def newestManifest(files: eqdelete.state.StateFiles): eqdelete.state.KeptStores.Manifest =
    eqdelete.state.KeptStores.newestLoadable(files)(_ => true)(identity)(_ => Nil, _ => ()).toOption.get.manifest

  test("lookups find exactly the live entries of each key, through a load, adds, removals and a purge, with payloads") {
    val sc = TestSpark.session.sparkContext
    val random = new Random(3)
    val loaded = (0 until 5000).map(i => (random.nextInt(2000).toLong, i % 7, i.toLong))
    val added = (0 until 500).map(i => (random.nextInt(2500).toLong, 8, i.toLong))
    val removed = random.shuffle(loaded).take(700)
    val live = (loaded ++ added).toSet -- removed
    def entries(rows: Seq[(Long, Int, Long)]) = sc.parallelize(rows.map { case (k, f, p) => LiveKeyEntry(packed(k), f, p) }, 3)
    def nullable(k: Long) = if (k % 97 == 0) 0L else k  // every NULL key is one key

    val files = TestSpark.stateFiles()
    val index = LiveKeyIndex.create(files, 3, snapshotEvery = 4)
    try {
      assert(index.load(entries(loaded)) == loaded.size)
      assert(index.add(entries(added)) == added.size)
      // Resolved as a round resolves them: found by a lookup of their keys, removed where found.
      val resolved = removed.map { case (k, f, p) => (nullable(k), f, p) }.toSet
      val resolvedFound = index.lookup(sc.parallelize(resolved.toSeq.map(_._1).distinct.map(k => (packed(k), (k, packed(k)))), 4))
        .collect { case ((k, key), f, p) if resolved((k, f, p)) => LiveKeyEntry(key, f, p) }
      assert(index.removeFound(resolvedFound) == removed.size)
      val asked = (0L until 2600L).filterNot(k => k % 97 == 0 && k != 0)  // the NULL key asked once
      val found = index.lookup(sc.parallelize(asked.map(k => (packed(k), k)), 4)).collect().toSeq
      val expected = live.toSeq.map { case (k, f, p) => (nullable(k), f, p) }.sorted
      assert(found.sorted == expected)

      // Files 2 and 8 go out of use: their entries leave, every other stays.
      val gone = Set(2, 8)
      assert(index.purge(sc, gone) == live.count { case (_, f, _) => gone(f) })
      val afterPurge = index.lookup(sc.parallelize(asked.map(k => (packed(k), k)), 4)).collect().toSeq
      assert(afterPurge.sorted == expected.filterNot { case (_, f, _) => gone(f) })
      assert(index.stores.current.exists(_.deltas.exists(_.file.isDefined)), "some version a delta")

      // Every store lost here (an executor lost, a task elsewhere): each loads from its checkpoint.
      val loadsBefore = LiveKeyStores.loaded
      LiveKeyStores.drop(index.id)
      val reloaded = index.lookup(sc.parallelize(asked.map(k => (packed(k), k)), 4)).collect().toSeq
      assert(reloaded.sorted == afterPurge.sorted)
      assert(LiveKeyStores.loaded - loadsBefore == 3)

      // A restart: the index saved, restored from its manifest under a new id, reading the same files.
      index.stores.save(new com.fasterxml.jackson.databind.ObjectMapper().createObjectNode().put("kind", "test"))
      val manifest = newestManifest(files)
      val restored = LiveKeyIndex.restored(files, manifest, snapshotEvery = 3)
      assert(restored.id != index.id)
      assert(restored.executors == 0, "restored: no store used here yet")
      assert(restored.lookup(sc.parallelize(asked.map(k => (packed(k), k)), 4)).collect().toSeq.sorted == afterPurge.sorted)
      // Where the lookup's tasks loaded the stores is where its next step's tasks prefer to run.
      assert(restored.executors == 1)
      // It goes on from there in its own directory, the first one's files untouched.
      assert(restored.add(entries(Seq((1L, 9, 1L)))) == 1)
      assert(index.lookup(sc.parallelize(Seq((packed(1L), 1L)), 4)).collect().forall(_._2 != 9))
      restored.drop(sc)
    } finally index.drop(sc)

    LiveKeyStores.drop(index.id)
    val lost = intercept[SparkException](index.lookup(sc.parallelize(Seq((packed(1L), 1L)), 3)).collect())
    assert(Iterator.iterate[Throwable](lost)(_.getCause).takeWhile(_ != null).exists(_.isInstanceOf[KeptStateLostException]),
      "a dropped index's lookup fails as lost")
  }

  test("each save keeps what its last three versions need and deletes the rest, without reading a manifest back") {
    val sc = TestSpark.session.sparkContext
    val index = LiveKeyIndex.create(TestSpark.stateFiles(), 2, snapshotEvery = 3)
    val driver = new com.fasterxml.jackson.databind.ObjectMapper().createObjectNode()
    try {
      index.load(sc.parallelize((0L until 400L).map(k => LiveKeyEntry(packed(k), 0, k)), 2))
      var needs = Vector.empty[Set[String]]
      (1 to 24).foreach { i =>
        assert(index.add(sc.parallelize(Seq(LiveKeyEntry(packed(1000L + i), 1, i.toLong)), 2)) == 1)
        index.stores.save(driver)
        needs :+= index.stores.current.flatMap(_.files.map(_.rel)).toSet
        val (manifests, stored) = index.stores.files.list().map(_.rel).partition(_.endsWith(".json"))
        assert(manifests.size == math.min(i, 3), s"save $i: $manifests")
        assert(stored.toSet == needs.takeRight(3).flatten.toSet, s"save $i")
      }
      val restored = LiveKeyIndex.restored(index.stores.files, newestManifest(index.stores.files), 3)
      val asked = (1001L to 1024L) :+ 5L
      assert(restored.lookup(sc.parallelize(asked.map(k => (packed(k), k)), 2)).collect().map(_._1).sorted.toSeq == asked.sorted)
      restored.drop(sc)
    } finally index.drop(sc)
  }

  test("entries a lookup found are removed where they were found, each once though found twice") {
    val sc = TestSpark.session.sparkContext
    val random = new Random(5)
    val loaded = (0 until 3000).map(i => (random.nextInt(800).toLong, i % 5, i.toLong))
    val index = LiveKeyIndex.create(TestSpark.stateFiles(), 3, snapshotEvery = 10)
    try {
      index.load(sc.parallelize(loaded.map { case (k, f, p) => LiveKeyEntry(packed(k), f, p) }, 2))
      // Every key asked twice (two delete rows of one key), out of order; what file 1 holds is resolved.
      val asked = random.shuffle((0L until 800L).filterNot(k => k % 97 == 0) ++ (0L until 800L).filterNot(k => k % 97 == 0))
      val found = index.lookup(sc.parallelize(asked.map(k => (packed(k), packed(k))), 4))  // the key as its payload
        .filter(_._2 == 1).map { case (key, f, p) => LiveKeyEntry(key, f, p) }
      val resolved = loaded.filter { case (k, f, _) => f == 1 && k % 97 != 0 }
      assert(index.removeFound(found) == resolved.size)
      val after = index.lookup(sc.parallelize((0L until 800L).filterNot(k => k % 97 == 0).map(k => (packed(k), k)), 2)).collect()
      assert(after.map { case (k, f, p) => (k, f, p) }.sorted.toSeq == (loaded.toSet -- resolved).filter(_._1 % 97 != 0).toSeq.sorted)
      // Entries not as found (another partitioning) are refused, not removed from the wrong store.
      intercept[IllegalArgumentException](index.removeFound(sc.parallelize(Seq(LiveKeyEntry(packed(1L), 0, 0L)), 1)))
    } finally index.drop(sc)
  }
}
