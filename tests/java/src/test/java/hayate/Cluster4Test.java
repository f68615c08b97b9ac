package hayate;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.datastax.oss.driver.api.core.CqlSession;
import com.datastax.oss.driver.api.core.DefaultConsistencyLevel;
import com.datastax.oss.driver.api.core.cql.BoundStatement;
import com.datastax.oss.driver.api.core.cql.PreparedStatement;
import com.datastax.oss.driver.api.core.cql.ResultSet;
import com.datastax.oss.driver.api.core.cql.Row;
import com.datastax.oss.driver.api.core.metadata.Node;
import com.datastax.oss.driver.api.core.metadata.NodeState;
import com.datastax.oss.driver.api.core.metadata.TokenMap;
import java.net.InetSocketAddress;
import java.util.HashSet;
import java.util.Set;
import java.util.TreeSet;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The Apache Cassandra Java driver 4.18 against a cluster of three: every node found from one
 * contact point (through system.peers_v2), and its default load balancing policy, token-aware,
 * sends each request to a replica. Skipped unless tests/python/test_cluster_java.py gives it a
 * cluster.
 */
class Cluster4Test {
  static final String KEYSPACE = "cluster_j4_" + Long.toHexString(System.nanoTime());
  static final int REQUESTS = 1000;

  static CqlSession session;

  @BeforeAll
  static void connect() {
    assumeTrue(ClusterMetrics.given(), "no cluster given (hayate.cluster.hosts)");
    session = ClusterMetrics.connect4();
  }

  @AfterAll
  static void close() {
    if (session != null) {
      session.close();
    }
  }

  @Test
  void seesEveryNodeWithItsTokens() {
    Set<String> seen = new TreeSet<>();
    TokenMap tokens = session.getMetadata().getTokenMap().orElseThrow();
    for (Node node : session.getMetadata().getNodes().values()) {
      InetSocketAddress address = (InetSocketAddress) node.getEndPoint().resolve();
      seen.add(address.getAddress().getHostAddress());
      assertEquals(ClusterMetrics.PORT, address.getPort(), node + "'s CQL port");
      assertEquals(NodeState.UP, node.getState(), node + " is not up for the driver");
      assertEquals("datacenter1", node.getDatacenter());
      assertEquals(16, tokens.getTokens(node).size(), node + "'s tokens");
    }
    assertEquals(new TreeSet<>(ClusterMetrics.hosts()), seen);
  }

  @Test
  void routesEachRequestToAReplica() throws Exception {
    session.execute("CREATE KEYSPACE " + KEYSPACE
        + " WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}");
    session.execute("CREATE TABLE " + KEYSPACE + ".usertable (y_id varchar PRIMARY KEY, field0 varchar)");
    PreparedStatement insert = session.prepare("INSERT INTO " + KEYSPACE + ".usertable (y_id, field0) VALUES (?, ?)");
    PreparedStatement select = session.prepare("SELECT field0 FROM " + KEYSPACE + ".usertable WHERE y_id = ?");
    TokenMap tokens = session.getMetadata().getTokenMap().orElseThrow();
    double before = ClusterMetrics.sum(ClusterMetrics.NOT_REPLICA);
    Set<Node> coordinators = new HashSet<>();
    for (int i = 0; i < REQUESTS / 2; i++) {
      String key = "user" + i;
      BoundStatement write = insert.bind(key, "v" + i).setConsistencyLevel(DefaultConsistencyLevel.QUORUM);
      ResultSet written = session.execute(write);
      Node coordinator = written.getExecutionInfo().getCoordinator();
      Set<Node> replicas = tokens.getReplicas(write.getRoutingKeyspace(), write.getRoutingKey());
      assertTrue(replicas.contains(coordinator), key + " ran on " + coordinator + ", not on a replica " + replicas);
      coordinators.add(coordinator);
      Row row = session.execute(select.bind(key).setConsistencyLevel(DefaultConsistencyLevel.QUORUM)).one();
      assertEquals("v" + i, row.getString("field0"));
    }
    double notReplica = ClusterMetrics.sum(ClusterMetrics.NOT_REPLICA) - before;
    System.out.printf("driver 4.18: %.0f of %d requests reached a node that is not a replica; %d coordinators%n",
        notReplica, REQUESTS, coordinators.size());
    assertEquals(3, coordinators.size(), "every node is a replica of some key");
    assertTrue(notReplica < REQUESTS * 0.05, notReplica + " of " + REQUESTS + " requests missed their replica");
  }
}
