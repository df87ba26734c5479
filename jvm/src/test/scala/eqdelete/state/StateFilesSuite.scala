package eqdelete.state

import java.io.{File, RandomAccessFile}
import java.nio.file.{Files, Paths}

import eqdelete.testing.TestSpark

import org.scalatest.funsuite.AnyFunSuite

/**
 * A file of kept state is used only as it was saved: a download or a delta's read of a file
 * whose bytes changed in place (same size) or that was cut short fails as damaged, naming the file.
 */
class StateFilesSuite extends AnyFunSuite {

  private def saved(files: StateFiles, bytes: Array[Byte]): StoredFile = {
    val local = File.createTempFile("state", ".bin")
    Files.write(local.toPath, bytes)
    try files.upload(local, "p0/1-x.delta", "") finally local.delete()
  }

  private def stored(files: StateFiles, f: StoredFile): File = {
    val file = Paths.get(new java.net.URI(files.location(f.rel))).toFile
    // Hadoop's local file system checks a `.crc` file of its own beside it: gone, ours alone checks.
    new File(file.getParentFile, s".${file.getName}.crc").delete()
    file
  }

  private def damagedBy(body: => Unit): String = intercept[KeptStateDamagedException](body).getMessage

  test("a copied file carries its checksum; one changed in place or cut short is refused on download and on read") {
    val files = TestSpark.stateFiles()
    val bytes = Array.tabulate[Byte](100000)(i => (i * 31).toByte)
    val f = saved(files, bytes)
    assert(f.size == bytes.length && f.crc.isDefined)
    assert(StoreState.fromJson(StoreState.toJson(StoreState(None, Seq(StoreDelta(StoreVersion(1, "x"), Some(f)))))).files == Seq(f))

    val whole = File.createTempFile("state", ".copy")
    whole.delete()
    files.download(f, whole)
    assert(Files.readAllBytes(whole.toPath).sameElements(bytes))
    val in = files.openChecked(f)
    in.read(new Array[Byte](10))  // a reader that stops early: the rest is read at close, and checked
    in.close()

    val raf = new RandomAccessFile(stored(files, f), "rw")
    try { raf.seek(5000); raf.write(Array.fill[Byte](100)(7)) } finally raf.close()
    val other = new File(whole.getParentFile, s"${whole.getName}-2")
    assert(damagedBy(files.download(f, other)).contains("does not match its checksum"))
    assert(damagedBy { val in = files.openChecked(f); try in.readAllBytes() finally in.close() }.contains(f.rel))

    new RandomAccessFile(stored(files, f), "rw").setLength(bytes.length / 2L)
    other.delete()
    assert(damagedBy(files.download(f, other)).contains(s"holds ${bytes.length / 2} bytes, not ${bytes.length}"))
    whole.delete(); other.delete()
  }
}
