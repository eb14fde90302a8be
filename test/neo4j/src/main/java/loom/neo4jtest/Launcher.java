package loom.neo4jtest;

import java.io.IOException;
import java.io.InputStream;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.stream.Stream;
import org.neo4j.configuration.GraphDatabaseSettings;
import org.neo4j.configuration.connectors.BoltConnector;
import org.neo4j.configuration.connectors.HttpConnector;
import org.neo4j.configuration.connectors.HttpsConnector;
import org.neo4j.configuration.helpers.SocketAddress;
import org.neo4j.dbms.api.DatabaseManagementService;
import org.neo4j.dbms.api.DatabaseManagementServiceBuilder;
import org.neo4j.io.ByteUnit;

/**
 * Starts a throwaway Neo4j with authentication, Bolt on a free loopback port and a
 * small page cache, prints {@code bolt://127.0.0.1:<port>} on one line once it accepts
 * connections, and stops and deletes the store when its standard input closes, so
 * that it never outlives the test process that started it.
 *
 * <p>Usage: {@code java -cp 'target/classes:target/lib/*' loom.neo4jtest.Launcher <password>}
 */
public final class Launcher {
  private static final int BIND_ATTEMPTS = 5;

  public static void main(String[] args) throws Exception {
    if (args.length != 1 || args[0].length() < 8) {
      System.err.println("usage: Launcher <password of the neo4j user, at least 8 characters>");
      System.exit(2);
    }
    Path home = Files.createTempDirectory("loom-neo4j-");
    DatabaseManagementService dbms = null;
    int port = 0;
    for (int attempt = 1; dbms == null; attempt++) {
      port = freePort();
      try {
        dbms = start(home, port);
      } catch (RuntimeException e) {
        // Another process took the port between the probe and the bind.
        if (attempt == BIND_ATTEMPTS) {
          throw e;
        }
        deleteTree(home);
        Files.createDirectories(home);
      }
    }
    dbms.database("system")
        .executeTransactionally("ALTER USER neo4j SET PASSWORD $password CHANGE NOT REQUIRED",
            java.util.Map.of("password", args[0]));
    System.out.println("bolt://127.0.0.1:" + port);
    System.out.flush();

    InputStream in = System.in;
    while (in.read() != -1) {
      // Wait for the parent to close our stdin (or to die).
    }
    dbms.shutdown();
    deleteTree(home);
  }

  private static DatabaseManagementService start(Path home, int port) {
    DatabaseManagementService dbms = new DatabaseManagementServiceBuilder(home)
        .setConfig(BoltConnector.enabled, true)
        .setConfig(BoltConnector.listen_address, new SocketAddress("127.0.0.1", port))
        .setConfig(BoltConnector.encryption_level, BoltConnector.EncryptionLevel.DISABLED)
        .setConfig(HttpConnector.enabled, false)
        .setConfig(HttpsConnector.enabled, false)
        .setConfig(GraphDatabaseSettings.auth_enabled, true)
        .setConfig(GraphDatabaseSettings.pagecache_memory, ByteUnit.mebiBytes(128))
        .build();
    // build() returns before a failed connector bind surfaces; a query proves the database is up.
    dbms.database("neo4j").executeTransactionally("RETURN 1");
    return dbms;
  }

  private static int freePort() throws IOException {
    try (ServerSocket socket = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
      return socket.getLocalPort();
    }
  }

  private static void deleteTree(Path root) throws IOException {
    if (!Files.exists(root)) {
      return;
    }
    try (Stream<Path> paths = Files.walk(root)) {
      for (Path p : (Iterable<Path>) paths.sorted(Comparator.reverseOrder())::iterator) {
        Files.deleteIfExists(p);
      }
    }
  }

  private Launcher() {}
}
