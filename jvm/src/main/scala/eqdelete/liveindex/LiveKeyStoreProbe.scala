package eqdelete.liveindex

import java.io.File

import eqdelete.deleteindex.KeyBytes
import eqdelete.state.{RocksStore, StateLocation}

import org.apache.spark.SparkFiles
import org.apache.spark.sql.SparkSession

/**
 * What [[LiveKeyStore]] costs per key, measured before the index is built on it: stores of
 * `rows` entries over `partitions` tasks (one store each, on the executors' local disks, as the
 * index will hold them), long keys in random order (a streaming sink's), each entry a random one
 * of `dataFiles` files and its position. Per store: the load (every entry added), its bytes once
 * compacted, `lookups` lookups of keys it holds (each through an iterator of its own, then as
 * many again sorted first, through one [[LiveKeyStore.cursor]], as the index looks keys up), then
 * an update of `updates` new entries added and as many removed (a round's new rows and resolved ones).
 */
object LiveKeyStoreProbe {

  /** One store's measurements; times in nanoseconds. */
  final case class Measured(entries: Long, loadNanos: Long, compactNanos: Long, bytes: Long, lookups: Int,
      lookupNanos: Long, found: Long, updates: Int, updateNanos: Long, sortedLookupNanos: Long, sortedFound: Long)

  /**
   * The other way to load, through [[LiveKeyIndex]] itself: every entry made in a Spark job,
   * partitioned by its key's hash and sorted within partitions by Spark (which spills past
   * memory), each partition written as one sorted file its store ingests; then the first
   * 10,000 keys a store looked up, each to be found once. Its nanoseconds (every store in
   * parallel), bytes, the keys found, and the executors holding the stores.
   */
  final case class Bulk(entries: Long, nanos: Long, bytes: Long, asked: Long, found: Long, executors: Int)

  def bulk(session: SparkSession, rows: Long, partitions: Int, dataFiles: Int): Bulk = {
    val sc = session.sparkContext
    val started = System.nanoTime()
    // A local directory every executor of this machine reaches: the probe measures the stores, not the storage.
    val root = java.nio.file.Files.createTempDirectory("eqdelete-live-index-probe").toString
    val index = LiveKeyIndex.create(StateLocation.at(session, root), partitions, snapshotEvery = Int.MaxValue)
    try {
      val loaded = index.load(sc.range(0L, rows, 1L, partitions).map(i => LiveKeyEntry(packed(key(0, i)), file(i, dataFiles), i)))
      val nanos = System.nanoTime() - started
      val asked = math.min(rows, 10000L * partitions)
      val found = index.lookup(sc.range(0L, asked, 1L, partitions).map(i => (packed(key(0, i)), i))).count()
      Bulk(loaded, nanos, index.bytes(sc), asked, found, index.executors)
    } finally { index.drop(sc); RocksStore.deleteRecursively(new File(root)) }
  }

  private def packed(k: Long): Array[Byte] = {
    val b = new KeyBytes
    b.putLong(k)
    java.util.Arrays.copyOf(b.bytes, b.length)
  }

  private def file(i: Long, dataFiles: Int): Int = (mix(i) & Int.MaxValue).toInt % dataFiles

  def run(session: SparkSession, rows: Long, partitions: Int, dataFiles: Int, lookups: Int, updates: Int): Seq[Measured] = {
    val perStore = rows / partitions
    session.sparkContext.parallelize(0 until partitions, partitions).map { p =>
      val store = LiveKeyStore.create(new File(SparkFiles.getRootDirectory(), "eqdelete-live-index-probe"), s"p$p-")
      try measure(store, p, perStore, dataFiles, lookups, updates) finally store.close()
    }.collect().toSeq
  }

  /** The key of a store's `i`-th entry: distinct, in random order. */
  private def key(p: Int, i: Long): Long = mix(p.toLong << 40 | i)

  private def mix(x: Long): Long = {
    var z = x + 0x9E3779B97F4A7C15L
    z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L
    z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL
    z ^ (z >>> 31)
  }

  private def measure(store: LiveKeyStore, p: Int, entries: Long, dataFiles: Int, lookups: Int, updates: Int): Measured = {
    val bytes = new KeyBytes
    def packed(k: Long): KeyBytes = { bytes.reset(); bytes.putLong(k); bytes }
    def file(i: Long): Int = LiveKeyStoreProbe.file(i, dataFiles)
    val loadStart = System.nanoTime()
    var i = 0L
    while (i < entries) {
      val b = packed(key(p, i))
      store.add(b.bytes, b.length, file(i), i)
      i += 1
    }
    store.flush()
    val loadNanos = System.nanoTime() - loadStart
    val compactStart = System.nanoTime()
    store.compact()
    val compactNanos = System.nanoTime() - compactStart
    val size = store.bytes

    val random = new java.util.Random(p)
    var found = 0L
    val lookupStart = System.nanoTime()
    var n = 0
    while (n < lookups) {
      val b = packed(key(p, (random.nextDouble() * entries).toLong))
      store.lookup(b.bytes, b.length)((_, _) => found += 1)
      n += 1
    }
    val lookupNanos = System.nanoTime() - lookupStart

    // The same number of other keys, as LiveKeyIndex.lookup has them: sorted, one cursor. The
    // sort is Spark's there (in the shuffle that routes them); here it is timed too.
    val other = new java.util.Random(p + 7919L)
    var sortedFound = 0L
    val sortedStart = System.nanoTime()
    val prefixes = Array.fill(lookups) {
      val b = packed(key(p, (other.nextDouble() * entries).toLong))
      LiveKeyStore.keyPrefix(b.bytes, b.length)
    }
    java.util.Arrays.sort(prefixes, LiveKeyStore.EntryOrdering)
    val cursor = store.cursor()
    try prefixes.foreach(prefix => cursor.entriesOf(prefix)((_, _) => sortedFound += 1)) finally cursor.close()
    val sortedLookupNanos = System.nanoTime() - sortedStart

    val updateStart = System.nanoTime()
    n = 0
    while (n < updates) {
      val added = entries + n
      val b = packed(key(p, added))
      store.add(b.bytes, b.length, file(added), added)
      val gone = (random.nextDouble() * entries).toLong
      val r = packed(key(p, gone))
      store.remove(r.bytes, r.length, file(gone), gone)
      n += 1
    }
    store.flush()
    val updateNanos = System.nanoTime() - updateStart
    Measured(entries, loadNanos, compactNanos, size, lookups, lookupNanos, found, updates, updateNanos, sortedLookupNanos,
      sortedFound)
  }
}
