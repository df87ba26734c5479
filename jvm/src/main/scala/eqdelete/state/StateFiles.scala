package eqdelete.state

import java.io.{File, FileInputStream, FileOutputStream, InputStream, OutputStream}
import java.nio.charset.StandardCharsets
import java.nio.file.{Files, Path, Paths}

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
   * Copies a local file to `rel`; its bytes. A file that never changes (`immutable`: RocksDB's
   * sorted files) is linked instead where the root is on a local file system (`file:`) and the
   * same one: a second copy of the stores would only take their pages' place in the page cache.
   */
  def upload(local: File, rel: String, immutable: Boolean = false): Long = {
    val linked = immutable && localPath(rel).exists { to =>
      StateFiles.linked { Files.createDirectories(to.getParent); Files.deleteIfExists(to); Files.createLink(to, local.toPath) }
    }
    if (linked) local.length()
    else create(rel) { out =>
      val in = new FileInputStream(local)
      try in.transferTo(out) finally in.close()
    }
  }

  /**
   * Copies `rel` to a local file, which must come out `size` bytes long (a file cut short is no
   * state); linked, as [[upload]] links, when `immutable` and on the same local file system.
   */
  def download(rel: String, local: File, size: Long, immutable: Boolean = false): Unit = {
    val linked = immutable && localPath(rel).exists(from => StateFiles.linked(Files.createLink(local.toPath, from)))
    // An empty file (a RocksDB checkpoint's empty log) is made, not read: an object store may
    // refuse a read of no bytes (HTTP 416).
    val copied = if (linked) local.length() else if (size == 0) { Files.write(local.toPath, Array.emptyByteArray); 0L } else {
      val in = open(rel)
      val out = new FileOutputStream(local)
      try in.transferTo(out) finally { in.close(); out.close() }
    }
    if (copied != size) throw new IllegalStateException(s"eqdelete: kept state file ${location(rel)} holds $copied bytes, not $size")
  }

  /** `rel` as a local path, when the root is a `file:` location. */
  private def localPath(rel: String): Option[Path] =
    if (!root.startsWith("file:")) None else try Some(Paths.get(new java.net.URI(location(rel)))) catch { case NonFatal(_) => None }

  /** Every file under the root (relative to it): none when the root does not exist yet. */
  def list(): Seq[StateFiles.Listed] = io match {
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

  private final class CountingStream(out: OutputStream) extends OutputStream {
    var count = 0L
    override def write(b: Int): Unit = { out.write(b); count += 1 }
    override def write(b: Array[Byte], off: Int, len: Int): Unit = { out.write(b, off, len); count += len }
    override def flush(): Unit = out.flush()
    override def close(): Unit = out.close()
  }
}
