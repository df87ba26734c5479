import java.lang.reflect.Constructor;
import java.util.HashMap;
import java.util.Locale;
import java.util.Map;
import org.apache.hadoop.conf.Configuration;
import org.apache.iceberg.CatalogUtil;
import org.apache.iceberg.catalog.Catalog;
import org.apache.iceberg.rest.RESTCatalogAdapter;
import org.apache.iceberg.rest.RESTCatalogServlet;
import org.eclipse.jetty.ee10.servlet.ServletContextHandler;
import org.eclipse.jetty.ee10.servlet.ServletHolder;
import org.eclipse.jetty.http.UriCompliance;
import org.eclipse.jetty.server.HttpConfiguration;
import org.eclipse.jetty.server.HttpConnectionFactory;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;

/**
 * Iceberg's REST catalog server (the one behind Iceberg's REST fixture, from its
 * iceberg-open-api test fixtures) listening on 127.0.0.1 only: Iceberg's own RESTCatalogServer
 * binds every interface. Configured as that server is, by CATALOG_* environment variables
 * (CATALOG_IO__IMPL -> io-impl, CATALOG_S3_ENDPOINT -> s3.endpoint, CATALOG_REST_PORT -> the
 * port); with include-credentials it hands each table's S3 credentials to clients in the table's
 * FileIO configuration, as vending catalogs do. Run by eqdelete.tools.lakehouse with Java's
 * source launcher (java -cp ... LoopbackRestCatalog.java); prints "listening on PORT" when ready.
 */
public class LoopbackRestCatalog {
  public static void main(String[] args) throws Exception {
    Map<String, String> properties = new HashMap<>();
    System.getenv().forEach((key, value) -> {
      if (key.startsWith("CATALOG_")) {
        properties.put(key.substring("CATALOG_".length()).replace("__", "-").replace("_", ".").toLowerCase(Locale.ROOT), value);
      }
    });
    int port = Integer.parseInt(properties.remove("rest.port"));
    Catalog catalog = CatalogUtil.buildIcebergCatalog("rest_backend", properties, new Configuration());

    // Iceberg's server adapter (credentials in each table's config) is package-private.
    Class<?> contextClass = Class.forName("org.apache.iceberg.rest.RESTCatalogServer$CatalogContext");
    Constructor<?> context = contextClass.getDeclaredConstructor(Catalog.class, Map.class);
    context.setAccessible(true);
    Constructor<?> adapter = Class.forName("org.apache.iceberg.rest.RESTServerCatalogAdapter").getDeclaredConstructor(contextClass);
    adapter.setAccessible(true);
    RESTCatalogAdapter handler = (RESTCatalogAdapter) adapter.newInstance(context.newInstance(catalog, properties));

    ServletContextHandler servlets = new ServletContextHandler(ServletContextHandler.NO_SESSIONS);
    servlets.addServlet(new ServletHolder(new RESTCatalogServlet(handler)), "/*");
    servlets.getServletHandler().setDecodeAmbiguousURIs(true);
    Server server = new Server();
    // Iceberg 1.10's client looks a metadata table (db.t.snapshots) up first as a table in the
    // namespace db.t, joined by %1F; Jetty 12 refuses that path (400, "Suspicious Path Character")
    // where a catalog answers 404 and the client then loads the metadata table. Accept it.
    HttpConfiguration http = new HttpConfiguration();
    http.setUriCompliance(UriCompliance.LEGACY);
    ServerConnector connector = new ServerConnector(server, new HttpConnectionFactory(http));
    connector.setHost("127.0.0.1");
    connector.setPort(port);
    server.addConnector(connector);
    server.setHandler(servlets);
    server.setStopAtShutdown(true);
    server.start();
    System.out.println("listening on " + connector.getLocalPort());
    System.out.flush();
    server.join();
  }
}
