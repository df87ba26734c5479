package eqdelete.changes

import java.nio.charset.StandardCharsets

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.Path

/**
 * Where a stream started, kept in its checkpoint's source folder the first time it is asked, as
 * Spark's Kafka source keeps its starting offsets: a stream that starts at "latest" (or at the
 * earliest readable snapshot) and restarts before its first batch commits starts from the same
 * snapshot, not from a later one.
 */
final class ChangesStreamStart(metadataPath: String, hadoopConf: Configuration) {
  private val file = new Path(metadataPath, "eqdelete-changes-start.json")

  /** The start kept, or `resolve()`'s, kept now. */
  def getOrKeep(resolve: => StreamPosition): StreamPosition = {
    val fs = file.getFileSystem(hadoopConf)
    if (fs.exists(file)) {
      val in = fs.open(file)
      try ChangesOffset.fromJson(new String(in.readAllBytes(), StandardCharsets.UTF_8)).position finally in.close()
    } else {
      val start = resolve
      // Written aside and renamed into place: a crash leaves no half-written start behind.
      val temp = new Path(metadataPath, s".eqdelete-changes-start-${java.util.UUID.randomUUID()}.tmp")
      fs.mkdirs(file.getParent)
      val out = fs.create(temp, false)
      try out.write(ChangesOffset(start).json().getBytes(StandardCharsets.UTF_8)) finally out.close()
      if (!fs.rename(temp, file)) {
        fs.delete(temp, false)
        throw new IllegalStateException(s"eqdelete-changes: could not keep the stream's start in $file")
      }
      start
    }
  }
}
