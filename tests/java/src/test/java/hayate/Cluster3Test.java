package hayate;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.datastax.driver.core.BoundStatement;
import com.datastax.driver.core.Cluster;
import com.datastax.driver.core.ConsistencyLevel;
import com.datastax.driver.core.Host;
import com.datastax.driver.core.Metadata;
import com.datastax.driver.core.PreparedStatement;
import com.datastax.driver.core.ResultSet;
import com.datastax.driver.core.Row;
import com.datastax.driver.core.Session;
import com.datastax.driver.core.SocketOptions;
import java.util.HashSet;
import java.util.Set;
import java.util.TreeSet;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The DataStax Java driver 3.11 (YCSB's) against a cluster of three: it finds every node from
 * one contact point, and its default policy (token-aware over DC-aware round robin) sends each
 * request to a replica: each bound statement runs on a host the driver's own metadata names a
 * replica, and hayate counts (nearly) none as reaching a node that is not one. Skipped unless
 * tests/python/test_cluster_java.py gives it a cluster.
 */
class Cluster3Test {
  static final String KEYSPACE = "cluster_j3_" + Long.toHexString(System.nanoTime());
  static final int REQUESTS = 1000;

  static Cluster cluster;
  static Session session;

  @BeforeAll
  static void connect() throws Exception {
    assumeTrue(ClusterMetrics.given(), "no cluster given (hayate.cluster.hosts)");
    cluster = Cluster.builder()
        .addContactPoint(ClusterMetrics.hosts().get(0))
        .withPort(ClusterMetrics.PORT)
        .withSocketOptions(new SocketOptions().setReadTimeoutMillis(20000))
        .build();
    session = cluster.connect();
  }

  @AfterAll
  static void close() {
    if (cluster != null) {
      cluster.close();
    }
  }

  @Test
  void seesEveryNodeWithItsTokens() {
    Metadata metadata = cluster.getMetadata();
    Set<String> seen = new TreeSet<>();
    for (Host host : metadata.getAllHosts()) {
      seen.add(host.getEndPoint().resolve().getAddress().getHostAddress());
      assertTrue(host.isUp(), host + " is down for the driver");
      assertEquals("datacenter1", host.getDatacenter());
      assertEquals(16, host.getTokens().size(), host + "'s tokens");
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
    insert.setConsistencyLevel(ConsistencyLevel.QUORUM);
    select.setConsistencyLevel(ConsistencyLevel.QUORUM);
    Metadata metadata = cluster.getMetadata();
    double before = ClusterMetrics.sum(ClusterMetrics.NOT_REPLICA);
    Set<String> coordinators = new HashSet<>();
    for (int i = 0; i < REQUESTS / 2; i++) {
      String key = "user" + i;
      BoundStatement write = insert.bind(key, "v" + i);
      ResultSet written = session.execute(write);
      Host queried = written.getExecutionInfo().getQueriedHost();
      Set<Host> replicas = metadata.getReplicas(KEYSPACE, write.getRoutingKey(null, null));
      assertTrue(replicas.contains(queried), key + " ran on " + queried + ", not on a replica " + replicas);
      coordinators.add(queried.toString());
      Row row = session.execute(select.bind(key)).one();
      assertEquals("v" + i, row.getString("field0"));
    }
    double notReplica = ClusterMetrics.sum(ClusterMetrics.NOT_REPLICA) - before;
    System.out.printf("driver 3.11: %.0f of %d requests reached a node that is not a replica; coordinators %s%n",
        notReplica, REQUESTS, coordinators);
    assertEquals(3, coordinators.size(), "every node is a replica of some key");
    assertTrue(notReplica < REQUESTS * 0.05, notReplica + " of " + REQUESTS + " requests missed their replica");
  }
}
