package eqdelete.state

import java.io.{File, FileInputStream, FileOutputStream, InputStream, OutputStream}
import java.nio.charset.StandardCharsets
import java.nio.file.{Files, Path, Paths}
import java.util.zip.{CRC32C, CheckedInputStream}

import scala.jdk.CollectionConverters._
import scala.util.control.NonFatal

import org.apache.iceberg.io.{FileIO, SupportsPrefixOperations}

/**
 * The files of kept state under one directory, `root`, on whatever storage an Iceberg `FileIO`
 * writes (an object store, HDFS, a local disk): the FileIO the table's catalog configured, so the
 * state goes wherever the table's own files may go, with the same credentials. Serializable: the
 * executors read and write through it too.
 */
final class StateFiles(io: FileIO, val root: String) extends Serializable {
  require(!root.endsWith("/"), s"a state directory without its trailing slash: $root")

  /** The full location of `rel`, a path under the root. */
  def location(rel: String): String = s"$root/$rel"

  /** The files under `relDir` (a directory of the root), relative to the root. */
  def under(relDir: String): StateFiles = new StateFiles(io, location(relDir))

  /** A new file (replacing any of that name), written by `write`; its bytes. */
  def create(rel: String)(write: OutputStream => Unit): Long = {
    val counting = new StateFiles.CountingStream(io.newOutputFile(location(rel)).createOrOverwrite())
    try write(counting) finally counting.close()
    counting.count
  }

  def write(rel: String, text: String): Long = create(rel)(_.write(text.getBytes(StandardCharsets.UTF_8)))

  def read(rel: String): String = {
    val in = open(rel)
    try new String(in.readAllBytes(), StandardCharsets.UTF_8) finally in.close()
  }

  def open(rel: String): InputStream = io.newInputFile(location(rel)).newStream()

  /**
   * Copies a local file to `rel`, as the file `local` of a store: the stored file, with the CRC32C
   * of the bytes copied. A file that never changes (`immutable`: RocksDB's sorted files) is linked
   * instead where the root is on a local file system (`file:`) and the same one: a second copy of
   * the stores would only take their pages' place in the page cache.
   */
  def upload(file: File, rel: String, local: String, immutable: Boolean = false): StoredFile = {
    val linked = immutable && localPath(rel).exists { to =>
      StateFiles.linked { Files.createDirectories(to.getParent); Files.deleteIfExists(to); Files.createLink(to, file.toPath) }
    }
    if (linked) StoredFile(rel, local, file.length())
    else {
      val crc = new CRC32C
      val bytes = create(rel) { out =>
        val in = new CheckedInputStream(new FileInputStream(file), crc)
        try in.transferTo(out) finally in.close()
      }
      StoredFile(rel, local, bytes, Some(crc.getValue))
    }
  }

  /**
   * Copies `file` to a local file, which must come out of its size and checksum (a file cut short
   * or changed is no state: [[KeptStateDamagedException]]); linked, as [[upload]] links, when
   * `immutable` and on the same local file system.
   */
  def download(file: StoredFile, local: File, immutable: Boolean = false): Unit = {
    val linked = immutable && localPath(file.rel).exists(from => StateFiles.linked(Files.createLink(local.toPath, from)))
    // An empty file (a RocksDB checkpoint's empty log) is made, not read: an object store may
    // refuse a read of no bytes (HTTP 416).
    if (linked) checked(file, local.length(), None)
    else if (file.size == 0) { Files.write(local.toPath, Array.emptyByteArray); checked(file, 0L, None) }
    else {
      val crc = new CRC32C
      val copied = readingSaved(file) {
        val in = new CheckedInputStream(open(file.rel), crc)
        val out = new FileOutputStream(local)
        try in.transferTo(out) finally { in.close(); out.close() }
      }
      checked(file, copied, Some(crc.getValue))
    }
  }

  /**
   * `file`'s bytes, read as a stream that, when closed, reads what its reader left and fails
   * unless the file had its size and checksum ([[KeptStateDamagedException]]): a delta replayed
   * from it is used only if it was whole.
   */
  def openChecked(file: StoredFile): InputStream = {
    val crc = new CRC32C
    val counted = new StateFiles.CountingInput(new CheckedInputStream(open(file.rel), crc))
    new java.io.FilterInputStream(counted) {
      private var closed = false
      override def read(): Int = readingSaved(file)(super.read())
      override def read(b: Array[Byte], off: Int, len: Int): Int = readingSaved(file)(super.read(b, off, len))
      override def close(): Unit = if (!closed) {
        closed = true
        readingSaved(file)(try counted.transferTo(java.io.OutputStream.nullOutputStream()) finally counted.close())
        checked(file, counted.bytes, Some(crc.getValue))
      }
    }
  }

  /**
   * `read`, a read of the saved `file`: a checksum the storage keeps itself that does not match
   * (Hadoop's local file system checks its `.crc` files) is damage, as a mismatch of ours is.
   */
  private def readingSaved[A](file: StoredFile)(read: => A): A =
    try read catch {
      case e: java.io.IOException if e.getClass.getSimpleName == "ChecksumException" =>
        throw new KeptStateDamagedException(s"eqdelete: kept state file ${location(file.rel)} does not match its checksum " +
          s"(${e.getMessage})", e)
    }

  /** Fails unless `file` read `bytes` bytes of checksum `crc` (when computed and recorded). */
  private def checked(file: StoredFile, bytes: Long, crc: Option[Long]): Unit = {
    if (bytes != file.size) throw new KeptStateDamagedException(
      s"eqdelete: kept state file ${location(file.rel)} holds $bytes bytes, not ${file.size}", null)
    for (expected <- file.crc; found <- crc if found != expected) throw new KeptStateDamagedException(
      s"eqdelete: kept state file ${location(file.rel)} does not match its checksum (CRC32C ${found.toHexString}, " +
        s"saved ${expected.toHexString})", null)
  }

  /** `rel` as a local path, when the root is a `file:` location. */
  private def localPath(rel: String): Option[Path] =
    if (!root.startsWith("file:")) None else try Some(Paths.get(new java.net.URI(location(rel)))) catch { case NonFatal(_) => None }

  /** Every file under the root (relative to it): none when the root does not exist yet. */
  def list(): Seq[StateFiles.Listed] = localPath("") match {
    case Some(local) => listedLocally(local)
    case None => listedByFileIO()
  }

  /**
   * [[list]] of a `file:` root, through the JDK: Hadoop's local file system, without its native
   * library, forks a shell (`ls -ld`) for each file's permissions as it lists, about a second a
   * listing of a kept index's files. Its checksum files (`.<name>.crc`) are its own, not ours.
   */
  private def listedLocally(local: Path): Seq[StateFiles.Listed] =
    if (!Files.isDirectory(local)) Vector.empty
    else scala.util.Using.resource(Files.walk(local)) { paths =>
      paths.iterator().asScala.filter(Files.isRegularFile(_)).filterNot { p =>
        val name = p.getFileName.toString
        name.startsWith(".") && name.endsWith(".crc")
      }.flatMap { p =>
        try Some(StateFiles.Listed(local.relativize(p).iterator().asScala.mkString("/"), Files.size(p),
          Files.getLastModifiedTime(p).toMillis))
        catch { case _: java.nio.file.NoSuchFileException => None }  // deleted as it was listed
      }.toVector
    }

  private def listedByFileIO(): Seq[StateFiles.Listed] = io match {
    case prefixed: SupportsPrefixOperations =>
      val prefix = root + "/"
      try prefixed.listPrefix(prefix).asScala.toVector.map { f =>
        StateFiles.Listed(relative(f.location()), f.size(), f.createdAtMillis())
      } catch {
        case _: java.io.FileNotFoundException | _: java.io.UncheckedIOException if !exists => Vector.empty
        case NonFatal(e) if !exists && Option(e.getCause).exists(_.isInstanceOf[java.io.FileNotFoundException]) => Vector.empty
      }
    case other => throw new UnsupportedOperationException(s"eqdelete: kept state needs a FileIO that lists files; " +
      s"${other.getClass.getName} does not (set spark.eqdelete.state.location to a location of another kind)")
  }

  /**
   * A listed location relative to the root. A listing may spell the root otherwise than it was
   * given (Hadoop lists `file:///tmp/x` as `file:/tmp/x`): compared by their paths.
   */
  private def relative(location: String): String = {
    def path(l: String) = try Option(new java.net.URI(l).getPath).getOrElse(l) catch { case NonFatal(_) => l }
    val (rootPath, its) = (path(root) + "/", path(location))
    if (location.startsWith(root + "/")) location.stripPrefix(root + "/")
    else if (its.startsWith(rootPath)) its.stripPrefix(rootPath)
    else throw new IllegalStateException(s"eqdelete: $location was listed under $root")
  }

  private def exists: Boolean = try io.newInputFile(root).exists() catch { case NonFatal(_) => false }

  /** Whether the file `rel` (relative to the root) is there. */
  def exists(rel: String): Boolean = io.newInputFile(location(rel)).exists()

  /** Deletes files (relative to the root); one already gone is no error. */
  def delete(rels: Iterable[String]): Unit = rels.foreach { rel =>
    try io.deleteFile(location(rel)) catch { case NonFatal(_) if !io.newInputFile(location(rel)).exists() => () }
  }

  /** Deletes every file under the root. */
  def deleteAll(): Unit = delete(list().map(_.rel))
}

object StateFiles {
  /** Whether `link` made a hard link: not across file systems, nor where links are not supported (then a copy is made). */
  private def linked(link: => Unit): Boolean =
    try { link; true } catch { case _: java.io.IOException | _: UnsupportedOperationException => false }

  /** A file found under the root: its path relative to it, its bytes, when it was written. */
  final case class Listed(rel: String, size: Long, createdAtMillis: Long)

  private final class CountingInput(in: InputStream) extends java.io.FilterInputStream(in) {
    var bytes = 0L
    override def read(): Int = { val b = super.read(); if (b >= 0) bytes += 1; b }
    override def read(buf: Array[Byte], off: Int, len: Int): Int = { val n = super.read(buf, off, len); if (n > 0) bytes += n; n }
  }

  private final class CountingStream(out: OutputStream) extends OutputStream {
    var count = 0L
    override def write(b: Int): Unit = { out.write(b); count += 1 }
    override def write(b: Array[Byte], off: Int, len: Int): Unit = { out.write(b, off, len); count += len }
    override def flush(): Unit = out.flush()
    override def close(): Unit = out.close()
  }
}
