package hayate;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.datastax.oss.driver.api.core.CqlSession;
import com.datastax.oss.driver.api.core.DefaultConsistencyLevel;
import com.datastax.oss.driver.api.core.ProtocolVersion;
import com.datastax.oss.driver.api.core.config.DefaultDriverOption;
import com.datastax.oss.driver.api.core.config.DriverConfigLoader;
import com.datastax.oss.driver.api.core.cql.BoundStatement;
import com.datastax.oss.driver.api.core.cql.PreparedStatement;
import com.datastax.oss.driver.api.core.cql.ResultSet;
import com.datastax.oss.driver.api.core.cql.Row;
import com.datastax.oss.driver.api.core.cql.SimpleStatement;
import com.datastax.oss.driver.api.core.data.CqlDuration;
import com.datastax.oss.driver.api.core.metadata.Node;
import com.datastax.oss.driver.api.core.servererrors.InvalidQueryException;
import com.datastax.oss.driver.api.core.servererrors.SyntaxError;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.time.Instant;
import java.time.LocalDate;
import java.time.LocalTime;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The Apache Cassandra Java driver 4.18: CqlSession with the local datacenter hayate reports,
 * protocol negotiated by the driver (it starts at v5, which hayate speaks, segments and all), the YCSB
 * statements at QUORUM, paging, and prepared binds of Java 8 time types and collections.
 */
class Driver4Test {
  static final String HOST = System.getProperty("hayate.host", "127.0.0.1");
  static final int PORT = Integer.getInteger("hayate.port", 9042);
  static final String KEYSPACE = "ycsb_j4_" + Long.toHexString(System.nanoTime());
  static final int RECORDS = 300;

  static CqlSession session;

  @BeforeAll
  static void connect() {
    DriverConfigLoader config = DriverConfigLoader.programmaticBuilder()
        .withDuration(DefaultDriverOption.REQUEST_TIMEOUT, Duration.ofSeconds(20))
        .withDuration(DefaultDriverOption.CONNECTION_INIT_QUERY_TIMEOUT, Duration.ofSeconds(10))
        .withDuration(DefaultDriverOption.METADATA_SCHEMA_REQUEST_TIMEOUT, Duration.ofSeconds(20))
        .build();
    session = CqlSession.builder()
        .addContactPoint(new InetSocketAddress(HOST, PORT))
        .withLocalDatacenter("datacenter1")
        .withConfigLoader(config)
        .build();
    Collection<Node> nodes = session.getMetadata().getNodes().values();
    assertEquals(1, nodes.size());
    Node node = nodes.iterator().next();
    assertEquals("datacenter1", node.getDatacenter());
    assertEquals(ProtocolVersion.V5, session.getContext().getProtocolVersion(), "the driver negotiates v5");
    assertTrue(session.getMetadata().getTokenMap().isPresent(), "the driver built a token map");

    session.execute("CREATE KEYSPACE " + KEYSPACE
        + " WITH replication = {'class': 'NetworkTopologyStrategy', 'datacenter1': 1}");
    session.execute("CREATE TABLE " + KEYSPACE + ".usertable (y_id varchar PRIMARY KEY, field0 varchar,"
        + " field1 varchar, field2 varchar)");
    assertTrue(session.getMetadata().getKeyspace(KEYSPACE).flatMap(k -> k.getTable("usertable")).isPresent(),
        "metadata follows DDL");
    PreparedStatement insert = session.prepare(
        "INSERT INTO " + KEYSPACE + ".usertable (y_id, field0, field1, field2) VALUES (?, ?, ?, ?)");
    for (int r = 0; r < RECORDS; r++) {
      session.execute(insert.bind("user" + r, "a" + r, "b" + r, "c" + r)
          .setConsistencyLevel(DefaultConsistencyLevel.QUORUM));
    }
  }

  @AfterAll
  static void close() {
    if (session != null) {
      session.close();
    }
  }

  static String table() {
    return KEYSPACE + ".usertable";
  }

  @Test
  void ycsbReadUpdateDelete() {
    PreparedStatement read = session.prepare("SELECT * FROM " + table() + " WHERE y_id = ? LIMIT 1");
    Row row = session.execute(read.bind("user42").setConsistencyLevel(DefaultConsistencyLevel.QUORUM)).one();
    assertNotNull(row);
    assertEquals("a42", row.getString("field0"));
    assertEquals("c42", row.getString("field2"));

    PreparedStatement update = session.prepare("UPDATE " + table() + " SET field1 = ? WHERE y_id = ?");
    session.execute(update.bind("changed", "user42").setConsistencyLevel(DefaultConsistencyLevel.QUORUM));
    row = session.execute(read.bind("user42")).one();
    assertEquals("changed", row.getString("field1"));
    assertEquals("a42", row.getString("field0"));

    PreparedStatement delete = session.prepare("DELETE FROM " + table() + " WHERE y_id = ?");
    session.execute(delete.bind("user43").setConsistencyLevel(DefaultConsistencyLevel.QUORUM));
    assertNull(session.execute(read.bind("user43")).one());
  }

  @Test
  void ycsbScanByToken() {
    List<String> all = new ArrayList<>();
    for (Row row : session.execute(SimpleStatement.newInstance("SELECT y_id FROM " + table()).setPageSize(5000))) {
      all.add(row.getString(0));
    }
    PreparedStatement scan = session.prepare("SELECT * FROM " + table() + " WHERE token(y_id) >= token(?) LIMIT ?");
    List<String> got = new ArrayList<>();
    for (Row row : session.execute(scan.bind(all.get(10), 7).setConsistencyLevel(DefaultConsistencyLevel.QUORUM))) {
      got.add(row.getString("y_id"));
    }
    assertEquals(all.subList(10, 17), got);
  }

  @Test
  void pagedScan() {
    ResultSet rs = session.execute(SimpleStatement.newInstance("SELECT y_id, field0 FROM " + table()).setPageSize(41));
    assertEquals(41, rs.getAvailableWithoutFetching());
    assertFalse(rs.isFullyFetched());
    Set<String> seen = new HashSet<>();
    int count = 0;
    for (Row row : rs) {
      seen.add(row.getString("y_id"));
      count++;
    }
    assertEquals(seen.size(), count, "no row twice");
    assertTrue(seen.size() >= RECORDS - 1, "every row (one may be deleted by another test): " + seen.size());
  }

  @Test
  void simpleStatementWithPositionalValues() {
    // The driver sends these values in the QUERY frame; the server binds them with the types it
    // infers from the statement.
    Row row = session.execute(SimpleStatement.newInstance(
        "SELECT field0 FROM " + table() + " WHERE y_id = ?", "user7")).one();
    assertEquals("a7", row.getString(0));
  }

  @Test
  void preparedBindOfSeveralTypes() throws Exception {
    session.execute("CREATE TABLE IF NOT EXISTS " + KEYSPACE + ".typed (k uuid, c timeuuid, at timestamp, day date,"
        + " tod time, amount decimal, huge varint, raw blob, ip inet, tags set<text>, scores map<text, double>,"
        + " history list<bigint>, wait duration, ok boolean, PRIMARY KEY (k, c))");
    PreparedStatement insert = session.prepare("INSERT INTO " + KEYSPACE + ".typed (k, c, at, day, tod, amount, huge,"
        + " raw, ip, tags, scores, history, wait, ok) VALUES (:k, :c, :at, :day, :tod, :amount, :huge, :raw, :ip,"
        + " :tags, :scores, :history, :wait, :ok)");
    UUID k = UUID.randomUUID();
    UUID c = UUID.fromString("fe2b4360-28c6-11e2-81c1-0800200c9a66");
    Instant at = Instant.parse("1969-07-20T20:17:40.123Z");
    BoundStatement bound = insert.boundStatementBuilder()
        .setUuid("k", k)
        .setUuid("c", c)
        .setInstant("at", at)
        .setLocalDate("day", LocalDate.of(1, 1, 1))
        .setLocalTime("tod", LocalTime.of(23, 59, 59, 999_999_999))
        .setBigDecimal("amount", new BigDecimal("0.000001"))
        .setBigInteger("huge", BigInteger.TWO.pow(100).negate())
        .setByteBuffer("raw", ByteBuffer.wrap(new byte[0]))
        .setInetAddress("ip", InetAddress.getByName("10.1.2.3"))
        .setSet("tags", Set.of("x", "y"), String.class)
        .setMap("scores", Map.of("p", 0.5), String.class, Double.class)
        .setList("history", List.of(Long.MAX_VALUE, -1L), Long.class)
        .set("wait", CqlDuration.from("1mo2d3h"), CqlDuration.class)
        .setBoolean("ok", false)
        .build();
    session.execute(bound);
    Row row = session.execute(session.prepare("SELECT * FROM " + KEYSPACE + ".typed WHERE k = ?").bind(k)).one();
    assertEquals(c, row.getUuid("c"));
    assertEquals(at, row.getInstant("at"));
    assertEquals(LocalDate.of(1, 1, 1), row.getLocalDate("day"));
    assertEquals(LocalTime.of(23, 59, 59, 999_999_999), row.getLocalTime("tod"));
    assertEquals(new BigDecimal("0.000001"), row.getBigDecimal("amount"));
    assertEquals(BigInteger.TWO.pow(100).negate(), row.getBigInteger("huge"));
    assertEquals(0, row.getByteBuffer("raw").remaining());
    assertEquals(InetAddress.getByName("10.1.2.3"), row.getInetAddress("ip"));
    assertEquals(Set.of("x", "y"), row.getSet("tags", String.class));
    assertEquals(Map.of("p", 0.5), row.getMap("scores", String.class, Double.class));
    assertEquals(List.of(Long.MAX_VALUE, -1L), row.getList("history", Long.class));
    assertEquals(CqlDuration.from("1mo2d3h"), row.get("wait", CqlDuration.class));
    assertFalse(row.getBoolean("ok"));
  }

  @Test
  void errorsMapToTheDriversExceptions() {
    SyntaxError syntax = assertThrows(SyntaxError.class, () -> session.execute("SELECT * FROM WHERE"));
    assertTrue(syntax.getMessage().contains("line 1:"), syntax.getMessage());
    InvalidQueryException invalid = assertThrows(InvalidQueryException.class,
        () -> session.execute("SELECT * FROM " + KEYSPACE + ".no_such_table"));
    assertTrue(invalid.getMessage().contains("no_such_table"), invalid.getMessage());
  }
}
