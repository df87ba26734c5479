package eqdelete.liveindex

import java.nio.file.Files

import scala.collection.mutable
import scala.util.Random

import eqdelete.deleteindex.KeyBytes
import eqdelete.state.RocksStore

import org.apache.spark.unsafe.types.UTF8String
import org.scalatest.funsuite.AnyFunSuite

/** The store against a reference multimap, through adds, removes, flushes and a sorted load. */
class LiveKeyStoreSuite extends AnyFunSuite {

  private def packed(key: Option[String]): Array[Byte] = {
    val b = new KeyBytes
    key.fold(b.putNull())(k => b.putUTF8String(UTF8String.fromString(k)))
    java.util.Arrays.copyOf(b.bytes, b.length)
  }

  private def found(store: LiveKeyStore, key: Array[Byte]): Set[(Int, Long)] = {
    val entries = mutable.Set.empty[(Int, Long)]
    store.lookup(key, key.length)((file, position) => entries += ((file, position)))
    entries.toSet
  }

  private def withStore(test: LiveKeyStore => Unit): Unit = {
    val parent = Files.createTempDirectory("live-key-store-suite").toFile
    val store = LiveKeyStore.create(parent, "s")
    try test(store) finally {
      store.close()
      assert(!store.directory.exists(), "a closed store leaves no files")
      parent.delete()
    }
  }

  // Keys whose bytes are prefixes of one another ("ab", "abc"), the empty string, and NULL: a
  // lookup must find its own key's entries only.
  private val keys: Seq[Option[String]] = Seq(None, Some(""), Some("a"), Some("ab"), Some("abc"), Some("b")) ++
    (0 until 200).map(i => Some(s"k$i"))

  test("lookups find exactly each key's live entries through random adds, removes and flushes") {
    withStore { store =>
      val random = new Random(7)
      val reference = mutable.Map.empty[Option[String], Set[(Int, Long)]].withDefaultValue(Set.empty)
      for (step <- 0 until 5000) {
        val key = keys(random.nextInt(keys.size))
        val bytes = packed(key)
        if (random.nextInt(3) > 0 || reference(key).isEmpty) {
          val entry = (random.nextInt(5), random.nextInt(1000).toLong)
          store.add(bytes, bytes.length, entry._1, entry._2)
          reference(key) += entry
        } else {
          val entry = reference(key).toSeq(random.nextInt(reference(key).size))
          store.remove(bytes, bytes.length, entry._1, entry._2)
          reference(key) -= entry
        }
        if (step % 997 == 0) {
          store.flush()
          keys.foreach(k => assert(found(store, packed(k)) == reference(k), s"key $k after step $step"))
        }
      }
      store.compact()
      keys.foreach(k => assert(found(store, packed(k)) == reference(k), s"key $k at the end"))
      assert(store.bytes > 0)
    }
  }

  test("a sorted load holds what it was given, beside entries added one by one, and partitions keep a key together") {
    withStore { store =>
      val loaded = keys.zipWithIndex.flatMap { case (k, i) =>
        val b = packed(k)
        Seq(LiveKeyStore.entry(b, b.length, i % 3, i.toLong), LiveKeyStore.entry(b, b.length, 9, 1000L + i))
      }.sorted(LiveKeyStore.EntryOrdering)
      assert(store.ingestSorted(loaded.iterator) == loaded.size)
      val extra = packed(Some("ab"))
      store.add(extra, extra.length, 4, 4L)
      store.flush()
      keys.zipWithIndex.foreach { case (k, i) =>
        val expected = Set((i % 3, i.toLong), (9, 1000L + i)) ++ (if (k.contains("ab")) Set((4, 4L)) else Set.empty)
        assert(found(store, packed(k)) == expected, s"key $k")
      }
      for (k <- keys; partitions <- Seq(1, 2, 7)) {
        val b = packed(k)
        val homes = Seq((0, 0L), (3, 17L), (Int.MaxValue, Long.MaxValue))
          .map { case (f, p) => LiveKeyStore.partitionOf(LiveKeyStore.entry(b, b.length, f, p), partitions) }
        assert(homes.distinct.size == 1 && homes.head >= 0 && homes.head < partitions, s"key $k over $partitions")
      }
    }
  }

  test("warming reads the pieces of a file the page cache lacks, and passes over those it holds") {
    val dir = Files.createTempDirectory("eqdelete-warm")
    try {
      assume(Files.getFileStore(dir).`type`() != "tmpfs", "the temporary directory is in memory: no file of it is out of the page cache")
      // Two pieces written around the page cache (O_DIRECT, in whole aligned blocks), so that they start out of it.
      val file = dir.resolve("cold.sst")
      val piece = RocksStore.WarmPieceBytes
      val block = Files.getFileStore(dir).getBlockSize.toInt max 4096
      val buffer = java.nio.ByteBuffer.allocateDirect((1 << 20) + block).alignedSlice(block)
      val direct = scala.util.Try(java.nio.channels.FileChannel.open(file, java.nio.file.StandardOpenOption.CREATE_NEW,
        java.nio.file.StandardOpenOption.READ, java.nio.file.StandardOpenOption.WRITE, com.sun.nio.file.ExtendedOpenOption.DIRECT))
      assume(direct.isSuccess, s"the temporary directory's file system takes no O_DIRECT writes: $direct")
      val channel = direct.get
      try {
        while (channel.size() < 2 * piece) { buffer.clear().limit(1 << 20); while (buffer.hasRemaining) channel.write(buffer) }
        assume(!RocksStore.cached(channel, 0L, piece), "the file system kept O_DIRECT writes in the page cache")
      } finally channel.close()
      // The second piece read as a lookup would (the disk's read-ahead runs forward, past the end: never into the first).
      val reader = java.nio.channels.FileChannel.open(file)
      try { buffer.clear(); var at = piece; while (at < 2 * piece) { buffer.clear(); at += reader.read(buffer, at) } }
      finally reader.close()
      assert(RocksStore.warm(Seq(file)) == RocksStore.Warmed(2 * piece, piece))
      assert(RocksStore.warm(Seq(file)) == RocksStore.Warmed(2 * piece, 0L), "read once, it is cached")
      assert(RocksStore.warm(Seq(dir.resolve("gone.sst"))) == RocksStore.Warmed(0L, 0L))
    } finally { Files.list(dir).forEach(f => Files.delete(f)); Files.delete(dir) }
  }

  test("warming passes over the sorted files the page cache holds, and leaves the entries as they were") {
    withStore { store =>
      val loaded = (0 until 20000).map { i =>
        val b = packed(Some(s"w$i")); LiveKeyStore.entry(b, b.length, i % 5, i.toLong)
      }.sorted(LiveKeyStore.EntryOrdering)
      store.ingestSorted(loaded.iterator)
      val k = packed(Some("w1"))
      store.add(k, k.length, 7, 7L)
      store.compact()
      val sorted = Option(store.directory.listFiles()).toSeq.flatten.filter(_.getName.endsWith(".sst")).map(_.length()).sum
      val first = store.warm()
      assert(sorted > 0 && first.bytes == sorted && first.read <= sorted)
      assert(store.warm() == RocksStore.Warmed(sorted, 0L), "once read, the files are cached")
      assert(found(store, k) == Set((1, 1L), (7, 7L)))
    }
  }

  test("the page cache's room is known on Linux, and no more than the machine's memory") {
    assume(System.getProperty("os.name").startsWith("Linux"))
    val room = eqdelete.state.PageCache.room
    assert(room.exists(r => r > 0 && r <= java.lang.management.ManagementFactory.getOperatingSystemMXBean
      .asInstanceOf[com.sun.management.OperatingSystemMXBean].getTotalMemorySize), room)
  }

  test("a sorted file damaged in place fails lookups and purges: never read as 'no entry'") {
    withStore { store =>
      val keys = (0 until 200000).map(i => packed(Some(f"k$i%07d")))
      store.ingestSorted(keys.map(k => LiveKeyStore.entry(k, k.length, 1, 7L)).sorted(LiveKeyStore.EntryOrdering).iterator)
      // Its middle half overwritten with random bytes, its size unchanged: what a disk's or a store's bad write does.
      val sst = store.directory.listFiles().filter(_.getName.endsWith(".sst")).maxBy(_.length)
      val file = new java.io.RandomAccessFile(sst, "rw")
      try {
        val noise = new Array[Byte]((sst.length / 2).toInt)
        new Random(3).nextBytes(noise)
        file.seek(sst.length / 4)
        file.write(noise)
      } finally file.close()
      val lost = intercept[eqdelete.state.KeptStateLostException](keys.foreach(k => found(store, k)))
      assert(lost.getMessage.contains("cannot be read") && lost.getMessage.contains(store.directory.getName), lost.getMessage)
      intercept[eqdelete.state.KeptStateLostException](store.purge(Set(1)))
    }
  }
}
