package eqdelete.deleteindex

import org.apache.spark.unsafe.Platform
import org.apache.spark.unsafe.types.UTF8String

/**
 * Whether a hashed index without a slot table would probe in fewer misses: the records of
 * [[HashedKeyIndex]] (hash, scope, sequence number, the key's length and bytes) laid out bucket
 * by bucket of the key's home slot, found through a directory of where each bucket starts, so a
 * probe reads the directory (a few MB, near the cache) and then its bucket's records, one after
 * the other, where the slot table costs a miss for the slot and another for the record. The
 * same keys and probes as [[HashedKeyIndexCost]] (10^7 string delete keys, 10^7 probes, half
 * deleted), for 2^20 .. 2^23 buckets. Measured 2026-11-26 (PERFORMANCE.md): no bucket count
 * beats the slot table, so it was not built.
 *
 * {{{scripts/sbt.sh 'set spark41/Test/javaOptions += "-Xmx8g"' "spark41/Test/runMain eqdelete.deleteindex.BucketedRecordsCost 10000000"}}}
 */
object BucketedRecordsCost {
  private val Global = -1L

  private def rl(b: Array[Byte], at: Int): Long = java.lang.Long.reverseBytes(Platform.getLong(b, Platform.BYTE_ARRAY_OFFSET + at))

  /** The records, bucket by bucket; bucket b's from `directory(b)` until `directory(b + 1)`. */
  final class Layout(val directory: Array[Int], val records: Array[Byte], val mask: Int) {
    def find(hash: Long, scope: Long, key: KeyBytes): Long = {
      val b = HashedKeyIndex.slotOf(hash, scope, mask)
      var at = directory(b)
      val end = directory(b + 1)
      while (at < end) {
        val len = KeyBytes.readLength(records, at + 24)
        if (rl(records, at) == hash && rl(records, at + 8) == scope && len == key.length &&
          java.util.Arrays.equals(records, at + 28, at + 28 + len, key.bytes, 0, len)) return rl(records, at + 16)
        at += 28 + len
      }
      DeleteKeyIndex.NoDelete
    }
  }

  def build(hashes: Array[Long], keys: Array[Byte], buckets: Int): Layout = {
    val n = hashes.length
    val mask = buckets - 1
    val offsets = new Array[Int](n + 1)
    var at = 0
    var i = 0
    while (i < n) { offsets(i) = at; at += KeyBytes.LengthBytes + KeyBytes.readLength(keys, at); i += 1 }
    offsets(n) = at
    val dir = new Array[Int](buckets + 1)
    val bucketOf = new Array[Int](n)
    i = 0
    while (i < n) { val b = HashedKeyIndex.slotOf(hashes(i), Global, mask); bucketOf(i) = b; dir(b + 1) += 24 + offsets(i + 1) - offsets(i); i += 1 }
    var b = 0
    while (b < buckets) { dir(b + 1) += dir(b); b += 1 }
    val cursor = java.util.Arrays.copyOf(dir, buckets)
    val records = new Array[Byte](dir(buckets))
    i = 0
    while (i < n) {
      val w = cursor(bucketOf(i))
      KeyBytes.writeLong(records, w, hashes(i))
      KeyBytes.writeLong(records, w + 8, Global)
      KeyBytes.writeLong(records, w + 16, 2L)
      val len = offsets(i + 1) - offsets(i)
      System.arraycopy(keys, offsets(i), records, w + 24, len)
      cursor(bucketOf(i)) = w + 24 + len
      i += 1
    }
    new Layout(dir, records, mask)
  }

  def main(args: Array[String]): Unit = {
    val n = args.headOption.map(_.toInt).getOrElse(10000000)
    val (hashes, keys) = HashedKeyIndexCost.deleteKeys(n)
    val data = HashedKeyIndexCost.dataKeys(n)
    def probe(l: Layout, from: Int, until: Int): Long =
      HashedKeyIndexCost.probeWith(data, from, until, _ => true, l.find(_, Global, _))
    for (bucketsLog <- Seq(20, 21, 22, 23)) {
      val buckets = 1 << bucketsLog
      val t = new Array[Double](5); val t2 = new Array[Double](5); val tb = new Array[Double](5)
      var found = 0L
      var l: Layout = null
      for (r <- 0 until 5) {
        var s = System.nanoTime()
        l = build(hashes, keys, buckets)
        tb(r) = (System.nanoTime() - s) / 1e9
        s = System.nanoTime()
        found = probe(l, 0, n)
        t(r) = (System.nanoTime() - s) / 1e9
        s = System.nanoTime()
        val th = new Thread(() => probe(l, n / 2, n)); th.start(); probe(l, 0, n / 2); th.join()
        t2(r) = (System.nanoTime() - s) / 1e9
      }
      def med(x: Array[Double]) = x.sorted.apply(2)
      println(f"2^$bucketsLog buckets (${n.toDouble / buckets}%.1f keys each): build ${med(tb)}%.2f s, probe one thread ${med(t)}%.3f s (${med(t) * 1e9 / n}%.0f ns), two ${med(t2)}%.3f s; found $found; ${(l.records.length + 4L * l.directory.length) / 1e6}%.0f MB")
    }
  }
}
