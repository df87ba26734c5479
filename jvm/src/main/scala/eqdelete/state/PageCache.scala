package eqdelete.state

import java.nio.charset.StandardCharsets
import java.nio.file.{Files, Path, Paths}

import scala.util.Try

/**
 * What the operating system's page cache has room for on this machine: the memory it could give
 * files without taking any from a process, as Linux reports it (`MemAvailable`), within the
 * container's memory limit where one is set (cgroup v2 or v1: the limit less the processes' own
 * memory). None where neither is known (not Linux): the caller then assumes no room.
 */
object PageCache {
  def room: Option[Long] = {
    val machine = meminfo("MemAvailable")
    val container = cgroupV2.orElse(cgroupV1)
    (machine ++ container).reduceOption(_ min _)
  }

  private def meminfo(field: String): Option[Long] = read(Paths.get("/proc/meminfo")).flatMap { text =>
    text.linesIterator.collectFirst {
      case line if line.startsWith(field + ":") => line.stripPrefix(field + ":").trim.stripSuffix("kB").trim.toLong * 1024
    }
  }

  /** cgroup v2: `memory.max` less the anonymous memory of `memory.stat` (the page cache is what is left). */
  private def cgroupV2: Option[Long] = for {
    max <- read(Paths.get("/sys/fs/cgroup/memory.max")).map(_.trim).filter(_.forall(_.isDigit)).map(_.toLong)
    anon <- stat(Paths.get("/sys/fs/cgroup/memory.stat"), "anon")
  } yield (max - anon) max 0L

  /** cgroup v1: `memory.limit_in_bytes` (a huge number when unlimited) less `rss`. */
  private def cgroupV1: Option[Long] = for {
    max <- read(Paths.get("/sys/fs/cgroup/memory/memory.limit_in_bytes")).flatMap(s => Try(s.trim.toLong).toOption)
    if max < (1L << 60)
    rss <- stat(Paths.get("/sys/fs/cgroup/memory/memory.stat"), "rss")
  } yield (max - rss) max 0L

  private def stat(file: Path, field: String): Option[Long] = read(file).flatMap { text =>
    text.linesIterator.map(_.split(' ')).collectFirst { case Array(`field`, value) => Try(value.toLong).toOption }.flatten
  }

  private def read(file: Path): Option[String] =
    Try(new String(Files.readAllBytes(file), StandardCharsets.US_ASCII)).toOption
}
