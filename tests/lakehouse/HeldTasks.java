import java.io.File;
import java.io.IOException;
import java.util.Map;

import org.apache.spark.TaskContext;
import org.apache.spark.api.plugin.DriverPlugin;
import org.apache.spark.api.plugin.ExecutorPlugin;
import org.apache.spark.api.plugin.PluginContext;
import org.apache.spark.api.plugin.SparkPlugin;

/**
 * A Spark plugin for tests (spark.plugins=HeldTasks): while the file named by
 * spark.heldTasks.while exists, every task of a job group whose id starts with one of the
 * prefixes spark.heldTasks.groups lists (comma-separated; by default "eqdelete-maintain-", a round
 * of maintain; "REWRITE-DATA-FILES-": Iceberg's data file rewrite) waits before it runs, after
 * creating that file's name plus ".held" once. A stage of the round is held so, until the file goes or the task is
 * cancelled: the wait is a sleep, which a cancelled task's interrupt ends.
 */
public class HeldTasks implements SparkPlugin {
  @Override
  public DriverPlugin driverPlugin() {
    return null;  // the executors' side only
  }

  @Override
  public ExecutorPlugin executorPlugin() {
    return new ExecutorPlugin() {
      private File hold;
      private String[] groups;

      @Override
      public void init(PluginContext ctx, Map<String, String> extraConf) {
        hold = new File(ctx.conf().get("spark.heldTasks.while"));
        groups = ctx.conf().get("spark.heldTasks.groups", "eqdelete-maintain-").split(",");
      }

      @Override
      public void onTaskStart() {
        TaskContext task = TaskContext.get();
        String group = task == null ? null : task.getLocalProperty("spark.jobGroup.id");
        if (group == null || java.util.Arrays.stream(groups).noneMatch(group::startsWith)) {
          return;
        }
        try {
          if (hold.exists()) {
            new File(hold.getPath() + ".held").createNewFile();
          }
          while (hold.exists()) {
            Thread.sleep(100);
          }
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          throw new RuntimeException("a held task was interrupted (cancelled)", e);
        } catch (IOException e) {
          throw new RuntimeException(e);
        }
      }
    };
  }
}
