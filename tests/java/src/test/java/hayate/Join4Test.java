package hayate;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.datastax.oss.driver.api.core.CqlSession;
import com.datastax.oss.driver.api.core.DefaultConsistencyLevel;
import com.datastax.oss.driver.api.core.cql.BoundStatement;
import com.datastax.oss.driver.api.core.cql.PreparedStatement;
import com.datastax.oss.driver.api.core.cql.ResultSet;
import com.datastax.oss.driver.api.core.metadata.Node;
import com.datastax.oss.driver.api.core.metadata.NodeState;
import com.datastax.oss.driver.api.core.metadata.TokenMap;
import java.net.InetSocketAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Optional;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The Apache Cassandra Java driver 4.18 connected to a cluster of three while a fourth node joins
 * it (a join that streams data): the driver must learn of the new node by itself (its
 * TOPOLOGY_CHANGE event and system.peers_v2), with its tokens, and route to it: every request of a
 * workload runs on a replica by the driver's own token map, and the new node coordinates its
 * share. tests/python/test_topology_java.py starts the fourth node once this class has connected
 * (it writes the file hayate.join.ready names) and passes its address as hayate.join.host.
 */
class Join4Test {
  static final String JOINING = System.getProperty("hayate.join.host", "");
  static final String READY = System.getProperty("hayate.join.ready", "");
  static final String KEYSPACE = "join_j4_" + Long.toHexString(System.nanoTime());
  static final Duration JOIN_TIMEOUT = Duration.ofSeconds(240);
  static final int REQUESTS = 600;

  static CqlSession session;

  @BeforeAll
  static void connect() throws Exception {
    assumeTrue(ClusterMetrics.given() && !JOINING.isBlank(), "no joining node given (hayate.join.host)");
    session = ClusterMetrics.connect4();
    assertEquals(3, session.getMetadata().getNodes().size(), "the driver sees the three nodes first");
    Files.writeString(Path.of(READY), "connected\n");
  }

  @AfterAll
  static void close() {
    if (session != null) {
      session.close();
    }
  }

  static Optional<Node> joined() {
    return session.getMetadata().getNodes().values().stream()
        .filter(n -> ((InetSocketAddress) n.getEndPoint().resolve()).getAddress().getHostAddress().equals(JOINING))
        .findFirst();
  }

  @Test
  void seesTheNewNodeAndRoutesToIt() throws Exception {
    long deadline = System.nanoTime() + JOIN_TIMEOUT.toNanos();
    Optional<Node> node = joined();
    while ((node.isEmpty() || node.get().getState() != NodeState.UP) && System.nanoTime() < deadline) {
      Thread.sleep(200);
      node = joined();
    }
    assertTrue(node.isPresent(), "the driver never learned of " + JOINING);
    assertEquals(NodeState.UP, node.get().getState(), JOINING + " is not up for the driver");
    TokenMap tokens = session.getMetadata().getTokenMap().orElseThrow();
    assertEquals(16, tokens.getTokens(node.get()).size(), JOINING + "'s tokens");
    assertEquals(4, session.getMetadata().getNodes().size());

    session.execute("CREATE KEYSPACE " + KEYSPACE
        + " WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}");
    session.execute("CREATE TABLE " + KEYSPACE + ".usertable (y_id varchar PRIMARY KEY, field0 varchar)");
    PreparedStatement insert = session.prepare("INSERT INTO " + KEYSPACE + ".usertable (y_id, field0) VALUES (?, ?)");
    tokens = session.getMetadata().getTokenMap().orElseThrow();
    double before = ClusterMetrics.sum(ClusterMetrics.NOT_REPLICA);
    int onTheNewNode = 0;
    for (int i = 0; i < REQUESTS; i++) {
      BoundStatement write = insert.bind("user" + i, "v" + i).setConsistencyLevel(DefaultConsistencyLevel.ONE);
      ResultSet written = session.execute(write);
      Node coordinator = written.getExecutionInfo().getCoordinator();
      assertTrue(tokens.getReplicas(write.getRoutingKeyspace(), write.getRoutingKey()).contains(coordinator),
          "user" + i + " ran on " + coordinator + ", not on its replica");
      if (coordinator.equals(node.get())) {
        onTheNewNode++;
      }
    }
    double notReplica = ClusterMetrics.sum(ClusterMetrics.NOT_REPLICA) - before;
    System.out.printf("driver 4.18 after a join: %d of %d requests on the new node, %.0f reached a non-replica%n",
        onTheNewNode, REQUESTS, notReplica);
    assertTrue(onTheNewNode > REQUESTS / 10, "the new node coordinated only " + onTheNewNode + " of " + REQUESTS);
    assertTrue(notReplica < REQUESTS * 0.05, notReplica + " of " + REQUESTS + " requests missed their replica");
  }
}
