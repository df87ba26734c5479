package eqdelete.commit

import org.apache.iceberg.exceptions.{CommitFailedException, ValidationException}

/** What a failure says, in one line, and what kind it is. */
object Failures {

  /** `e` and its causes, outermost first. */
  def causes(e: Throwable): Iterator[Throwable] = Iterator.iterate(e)(_.getCause).takeWhile(_ != null).take(32)

  /**
   * `e` in one line: the innermost of its messages that eqdelete wrote ("eqdelete: ..."), else its
   * class and first message line, with its innermost cause's where that says more (a Spark job's
   * failure names the task, its cause what went wrong).
   */
  def describe(e: Throwable): String = {
    val all = causes(e).toSeq
    all.reverseIterator.map(firstLine).find(_.startsWith("eqdelete: ")).getOrElse {
      def line(t: Throwable) = s"${t.getClass.getSimpleName}${Some(firstLine(t)).filter(_.nonEmpty).map(": " + _).getOrElse("")}"
      val root = all.last
      if ((root eq e) || firstLine(e).contains(firstLine(root))) line(e) else s"${line(e)} (${line(root)})"
    }
  }

  private def firstLine(t: Throwable): String =
    Option(t.getMessage).flatMap(_.linesIterator.map(_.trim).find(_.nonEmpty)).getOrElse("")

  /** A failure to connect at all: the request was never sent. */
  def neverSent(e: Throwable): Boolean = causes(e).exists {
    case _: java.net.ConnectException | _: java.net.UnknownHostException | _: java.net.NoRouteToHostException => true
    case _ => false
  }

  /**
   * A commit that lost only the race: the catalog refused it because the branch had moved on
   * (a writer's commit landed between its apply and its check), and Iceberg's validation never
   * failed. Sent again on the new head, the same change still holds.
   */
  def lostTheRace(e: Throwable): Boolean =
    causes(e).exists(_.isInstanceOf[CommitFailedException]) && !causes(e).exists(_.isInstanceOf[ValidationException])

  /** A commit that lost to another: refused by the catalog, or failing Iceberg's validation. */
  def isConflict(e: Throwable): Boolean = causes(e).exists {
    case _: CommitFailedException | _: ValidationException => true
    case _ => false
  }
}
