package hayate;

import com.datastax.oss.driver.api.core.CqlSession;
import com.datastax.oss.driver.api.core.config.DefaultDriverOption;
import com.datastax.oss.driver.api.core.config.DriverConfigLoader;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * The cluster the Cluster3Test, Cluster4Test and Join4Test classes run against, from the system
 * properties tests/python/test_cluster_java.py and test_topology_java.py pass
 * (hayate.cluster.hosts, hayate.port, hayate.metrics.port), and its nodes' Prometheus counters.
 */
final class ClusterMetrics {
  static final String HOSTS = System.getProperty("hayate.cluster.hosts", "");
  static final int PORT = Integer.getInteger("hayate.port", 9042);
  static final int METRICS_PORT = Integer.getInteger("hayate.metrics.port", 9180);
  /** Requests that reached a node that is not a replica of their token. */
  static final String NOT_REPLICA = "hayate_coordinator_not_replica_total";

  private ClusterMetrics() {}

  /** A 4.x driver session through the cluster's first host, with timeouts for a loaded machine. */
  static CqlSession connect4() {
    DriverConfigLoader config = DriverConfigLoader.programmaticBuilder()
        .withDuration(DefaultDriverOption.REQUEST_TIMEOUT, Duration.ofSeconds(20))
        .withDuration(DefaultDriverOption.CONNECTION_INIT_QUERY_TIMEOUT, Duration.ofSeconds(10))
        .withDuration(DefaultDriverOption.METADATA_SCHEMA_REQUEST_TIMEOUT, Duration.ofSeconds(20))
        .build();
    return CqlSession.builder()
        .addContactPoint(new InetSocketAddress(hosts().get(0), PORT))
        .withLocalDatacenter("datacenter1")
        .withConfigLoader(config)
        .build();
  }

  /** Whether a cluster was given; without one the cluster classes are skipped. */
  static boolean given() {
    return !HOSTS.isBlank();
  }

  static List<String> hosts() {
    List<String> out = new ArrayList<>();
    for (String h : HOSTS.split(",")) {
      if (!h.isBlank()) {
        out.add(h.trim());
      }
    }
    return out;
  }

  /** A counter summed over every node of the cluster. */
  static double sum(String name) throws Exception {
    HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
    double total = 0;
    for (String host : hosts()) {
      HttpRequest request = HttpRequest.newBuilder(URI.create("http://" + host + ":" + METRICS_PORT + "/metrics"))
          .timeout(Duration.ofSeconds(5))
          .build();
      String body = http.send(request, HttpResponse.BodyHandlers.ofString()).body();
      for (String line : body.split("\n")) {
        if (line.startsWith(name + " ")) {
          total += Double.parseDouble(line.substring(name.length() + 1).trim());
        }
      }
    }
    return total;
  }
}
