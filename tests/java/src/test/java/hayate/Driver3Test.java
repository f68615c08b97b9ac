package hayate;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.datastax.driver.core.BoundStatement;
import com.datastax.driver.core.Cluster;
import com.datastax.driver.core.ColumnDefinitions;
import com.datastax.driver.core.ConsistencyLevel;
import com.datastax.driver.core.Host;
import com.datastax.driver.core.LocalDate;
import com.datastax.driver.core.Metadata;
import com.datastax.driver.core.PreparedStatement;
import com.datastax.driver.core.ResultSet;
import com.datastax.driver.core.Row;
import com.datastax.driver.core.Session;
import com.datastax.driver.core.SimpleStatement;
import com.datastax.driver.core.SocketOptions;
import com.datastax.driver.core.exceptions.InvalidQueryException;
import com.datastax.driver.core.exceptions.SyntaxError;
import com.datastax.driver.core.querybuilder.Insert;
import com.datastax.driver.core.querybuilder.QueryBuilder;
import com.datastax.driver.core.querybuilder.Select;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.net.InetAddress;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Date;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The DataStax Java driver 3.11, used the way YCSB's cassandra-cql binding uses it
 * (site.ycsb.db.CassandraCQLClient): statements built with QueryBuilder, prepared, bound with
 * strings, run at QUORUM, rows read back column by column as raw bytes.
 */
class Driver3Test {
  static final String HOST = System.getProperty("hayate.host", "127.0.0.1");
  static final int PORT = Integer.getInteger("hayate.port", 9042);
  static final String KEYSPACE = "ycsb_j3_" + Long.toHexString(System.nanoTime());
  static final String TABLE = "usertable";
  static final String KEY = "y_id";
  static final int FIELDS = 10;
  static final int RECORDS = 250;

  static Cluster cluster;
  static Session session;

  @BeforeAll
  static void connect() {
    // YCSB: Cluster.builder().withPort(port).addContactPoints(hosts).build(), then reads the
    // metadata to log the cluster name and each host's datacenter and rack.
    cluster = Cluster.builder()
        .addContactPoint(HOST)
        .withPort(PORT)
        .withSocketOptions(new SocketOptions().setReadTimeoutMillis(20000))
        .build();
    Metadata metadata = cluster.getMetadata();
    assertNotNull(metadata.getClusterName());
    Set<Host> hosts = metadata.getAllHosts();
    assertEquals(1, hosts.size(), "one node, no peers");
    Host host = hosts.iterator().next();
    assertEquals("datacenter1", host.getDatacenter());
    assertNotNull(host.getRack());

    Session admin = cluster.connect();
    admin.execute("CREATE KEYSPACE " + KEYSPACE
        + " WITH REPLICATION = {'class' : 'SimpleStrategy', 'replication_factor': 1}");
    StringBuilder table = new StringBuilder("CREATE TABLE " + KEYSPACE + "." + TABLE + " (" + KEY + " varchar primary key");
    for (int i = 0; i < FIELDS; i++) {
      table.append(", field").append(i).append(" varchar");
    }
    admin.execute(table.append(")").toString());
    admin.close();
    session = cluster.connect(KEYSPACE);
    assertNotNull(cluster.getMetadata().getKeyspace(KEYSPACE).getTable(TABLE), "metadata follows DDL");
  }

  @AfterAll
  static void close() {
    if (cluster != null) {
      cluster.close();
    }
  }

  static String value(int record, int field) {
    return "value-" + record + "-" + field + "-" + "x".repeat(record % 50);
  }

  static String key(int record) {
    return "user" + record;
  }

  static PreparedStatement prepareInsert() {
    Insert insert = QueryBuilder.insertInto(TABLE);
    insert.value(KEY, QueryBuilder.bindMarker());
    for (int i = 0; i < FIELDS; i++) {
      insert.value("field" + i, QueryBuilder.bindMarker());
    }
    // YCSB prepares the builder's text as is, trailing ";" included.
    assertTrue(insert.toString().endsWith(";"));
    PreparedStatement stmt = session.prepare(insert);
    stmt.setConsistencyLevel(ConsistencyLevel.QUORUM);
    return stmt;
  }

  static void load() {
    PreparedStatement insert = prepareInsert();
    for (int r = 0; r < RECORDS; r++) {
      BoundStatement bound = insert.bind();
      bound.setString(0, key(r));
      for (int i = 0; i < FIELDS; i++) {
        bound.setString(i + 1, value(r, i));
      }
      session.execute(bound);
    }
  }

  static synchronized void loadOnce() {
    if (session.execute("SELECT * FROM " + TABLE + " WHERE " + KEY + " = 'user0'").one() == null) {
      load();
    }
  }

  @Test
  void ycsbReadAllFields() {
    loadOnce();
    Select select = QueryBuilder.select().all().from(TABLE);
    select.where(QueryBuilder.eq(KEY, QueryBuilder.bindMarker())).limit(1);
    PreparedStatement read = session.prepare(select);
    read.setConsistencyLevel(ConsistencyLevel.QUORUM);
    for (int r : new int[] {0, 1, 77, RECORDS - 1}) {
      Row row = session.execute(read.bind(key(r))).one();
      assertNotNull(row, key(r));
      // YCSB reads every column as raw bytes through the column definitions.
      ColumnDefinitions cd = row.getColumnDefinitions();
      assertEquals(FIELDS + 1, cd.size());
      for (ColumnDefinitions.Definition def : cd) {
        ByteBuffer val = row.getBytesUnsafe(def.getName());
        String text = StandardCharsets.UTF_8.decode(val).toString();
        if (def.getName().equals(KEY)) {
          assertEquals(key(r), text);
        } else {
          assertEquals(value(r, Integer.parseInt(def.getName().substring(5))), text);
        }
      }
    }
    assertNull(session.execute(read.bind("no such user")).one());
  }

  @Test
  void ycsbReadSomeFields() {
    loadOnce();
    Select.Builder builder = QueryBuilder.select("field3", "field7");
    Select select = builder.from(TABLE);
    select.where(QueryBuilder.eq(KEY, QueryBuilder.bindMarker())).limit(1);
    PreparedStatement read = session.prepare(select);
    read.setConsistencyLevel(ConsistencyLevel.QUORUM);
    Row row = session.execute(read.bind(key(5))).one();
    assertEquals(value(5, 3), row.getString("field3"));
    assertEquals(value(5, 7), row.getString("field7"));
  }

  @Test
  void ycsbScan() {
    loadOnce();
    // YCSB's scan statement, assembled exactly as CassandraCQLClient.scan does.
    String initial = QueryBuilder.select().all().from(TABLE).toString();
    String scanText = initial.substring(0, initial.length() - 1)
        + " WHERE " + QueryBuilder.token(KEY) + " >= token(" + QueryBuilder.bindMarker() + ")"
        + " LIMIT " + QueryBuilder.bindMarker();
    assertEquals("SELECT * FROM usertable WHERE token(y_id) >= token(?) LIMIT ?", scanText);
    PreparedStatement scan = session.prepare(scanText);
    scan.setConsistencyLevel(ConsistencyLevel.QUORUM);

    // The first key in token order starts a scan that can see every row.
    List<String> all = new ArrayList<>();
    for (Row row : session.execute(new SimpleStatement("SELECT y_id FROM usertable").setFetchSize(1000))) {
      all.add(row.getString(0));
    }
    String start = all.get(0);
    List<String> scanned = new ArrayList<>();
    for (Row row : session.execute(scan.bind(start, 20))) {
      scanned.add(row.getString(KEY));
      assertEquals(FIELDS + 1, row.getColumnDefinitions().size());
    }
    assertEquals(all.subList(0, 20), scanned, "scan returns the next 20 keys in token order");
    scanned.clear();
    for (Row row : session.execute(scan.bind(all.get(100), 5))) {
      scanned.add(row.getString(KEY));
    }
    assertEquals(all.subList(100, 105), scanned);
  }

  @Test
  void ycsbUpdateAndDelete() {
    loadOnce();
    PreparedStatement update = session.prepare(
        QueryBuilder.update(TABLE)
            .with(QueryBuilder.set("field2", QueryBuilder.bindMarker()))
            .where(QueryBuilder.eq(KEY, QueryBuilder.bindMarker())));
    update.setConsistencyLevel(ConsistencyLevel.QUORUM);
    session.execute(update.bind("updated", key(200)));
    Row row = session.execute("SELECT field1, field2 FROM usertable WHERE y_id = ?", key(200)).one();
    assertEquals("updated", row.getString("field2"));
    assertEquals(value(200, 1), row.getString("field1"));

    PreparedStatement delete = session.prepare(
        QueryBuilder.delete().from(TABLE).where(QueryBuilder.eq(KEY, QueryBuilder.bindMarker())));
    delete.setConsistencyLevel(ConsistencyLevel.QUORUM);
    session.execute(delete.bind(key(201)));
    assertNull(session.execute("SELECT * FROM usertable WHERE y_id = ?", key(201)).one());
  }

  @Test
  void pagedScanReturnsEveryRowOnce() {
    loadOnce();
    ResultSet rs = session.execute(new SimpleStatement("SELECT y_id FROM usertable").setFetchSize(37));
    assertEquals(37, rs.getAvailableWithoutFetching());
    assertFalse(rs.isFullyFetched());
    Set<String> seen = new HashSet<>();
    int count = 0;
    for (Row row : rs) {
      seen.add(row.getString(0));
      count++;
    }
    // Rows 201 may have been deleted by another test; each row appears once either way.
    assertEquals(seen.size(), count, "no row twice");
    assertTrue(seen.size() >= RECORDS - 1, "every row: " + seen.size());
  }

  @Test
  void preparedBindOfSeveralTypes() throws Exception {
    session.execute("CREATE TABLE IF NOT EXISTS typed (k uuid PRIMARY KEY, ts timestamp, big bigint, d double,"
        + " b blob, tags list<text>, counts map<text, int>, flag boolean, dec decimal, ip inet, day date,"
        + " vi varint, small smallint, tiny tinyint, f float)");
    PreparedStatement insert = session.prepare("INSERT INTO typed (k, ts, big, d, b, tags, counts, flag, dec, ip, day, vi,"
        + " small, tiny, f) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    UUID k = UUID.randomUUID();
    Date ts = new Date(1700000000123L);
    BigDecimal dec = new BigDecimal("-12345.6789");
    BigInteger vi = new BigInteger("123456789012345678901234567890");
    InetAddress ip = InetAddress.getByName("2001:db8::1");
    session.execute(insert.bind(k, ts, Long.MIN_VALUE, Double.NaN, ByteBuffer.wrap(new byte[] {0, 1, -1}),
        List.of("a", "", "ü"), Map.of("x", 1, "y", -2), true, dec, ip, LocalDate.fromYearMonthDay(2024, 2, 29), vi,
        (short) -32768, (byte) 127, 1.5f));
    Row row = session.execute(session.prepare("SELECT * FROM typed WHERE k = ?").bind(k)).one();
    assertEquals(ts, row.getTimestamp("ts"));
    assertEquals(Long.MIN_VALUE, row.getLong("big"));
    assertTrue(Double.isNaN(row.getDouble("d")));
    assertEquals(ByteBuffer.wrap(new byte[] {0, 1, -1}), row.getBytes("b"));
    assertEquals(List.of("a", "", "ü"), row.getList("tags", String.class));
    assertEquals(Map.of("x", 1, "y", -2), row.getMap("counts", String.class, Integer.class));
    assertTrue(row.getBool("flag"));
    assertEquals(dec, row.getDecimal("dec"));
    assertEquals(ip, row.getInet("ip"));
    assertEquals(LocalDate.fromYearMonthDay(2024, 2, 29), row.getDate("day"));
    assertEquals(vi, row.getVarint("vi"));
    assertEquals((short) -32768, row.getShort("small"));
    assertEquals((byte) 127, row.getByte("tiny"));
    assertEquals(1.5f, row.getFloat("f"));
  }

  @Test
  void errorsMapToTheDriversExceptions() {
    SyntaxError syntax = assertThrows(SyntaxError.class, () -> session.execute("SELEC * FROM usertable"));
    assertTrue(syntax.getMessage().contains("line 1:"), syntax.getMessage());
    InvalidQueryException invalid =
        assertThrows(InvalidQueryException.class, () -> session.execute("SELECT * FROM no_such_table"));
    assertTrue(invalid.getMessage().contains("no_such_table"), invalid.getMessage());
    assertThrows(InvalidQueryException.class, () -> session.execute("SELECT nope FROM usertable"));
  }
}
