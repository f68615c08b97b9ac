/*
 * A YCSB database binding for CQL, for YCSB 0.17.0's core (site.ycsb:core on Maven Central).
 *
 * Why it exists: YCSB publishes only its core to Maven Central, not the cassandra-cql binding
 * (site.ycsb:cassandra-binding is absent there). This class does what that binding does, with
 * the same properties and the same statements, so that `bench/ycsb-java/ycsb ... cassandra-cql`
 * behaves as YCSB's own `bin/ycsb ... cassandra-cql`:
 *
 *   read    SELECT <fields or *> FROM <table> WHERE y_id = ? LIMIT 1
 *   scan    SELECT <fields or *> FROM <table> WHERE token(y_id) >= token(?) LIMIT ?
 *   update  UPDATE <table> SET f1 = ?, f2 = ? ... WHERE y_id = ?
 *   insert  INSERT INTO <table> (y_id, f1, ...) VALUES (?, ?, ...)
 *   delete  DELETE FROM <table> WHERE y_id = ?
 *
 * (<table> is keyspace.table.) Each statement is prepared once per shape and shared by every client thread, as one
 * application would; one Cluster and Session serve all threads (the DataStax driver 3.x pools
 * connections and routes each request to a replica of its key, token-aware).
 *
 * Properties (as YCSB's binding): hosts (required, comma-separated), port (9042),
 * cassandra.keyspace (ycsb), table (usertable), cassandra.username, cassandra.password,
 * cassandra.readconsistencylevel and cassandra.writeconsistencylevel (QUORUM, as YCSB's),
 * cassandra.maxconnections, cassandra.coreconnections, cassandra.connecttimeoutmillis,
 * cassandra.readtimeoutmillis.
 */
package hayate.ycsb;

import com.datastax.driver.core.BoundStatement;
import com.datastax.driver.core.Cluster;
import com.datastax.driver.core.ColumnDefinitions;
import com.datastax.driver.core.ConsistencyLevel;
import com.datastax.driver.core.HostDistance;
import com.datastax.driver.core.PreparedStatement;
import com.datastax.driver.core.ResultSet;
import com.datastax.driver.core.Row;
import com.datastax.driver.core.Session;
import com.datastax.driver.core.SocketOptions;
import site.ycsb.ByteIterator;
import site.ycsb.DB;
import site.ycsb.DBException;
import site.ycsb.Status;
import site.ycsb.StringByteIterator;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.Vector;
import java.util.concurrent.ConcurrentHashMap;

public final class CassandraCqlDb extends DB {
  private static final String KEY_COLUMN = "y_id";

  // Shared by every client thread: the first init() connects, the last cleanup() closes.
  private static final Object LOCK = new Object();
  private static int threadsOpen = 0;
  private static Cluster cluster;
  private static Session session;
  private static ConsistencyLevel readConsistency;
  private static ConsistencyLevel writeConsistency;
  private static String table;
  private static final ConcurrentHashMap<String, PreparedStatement> PREPARED =
      new ConcurrentHashMap<>();

  @Override
  public void init() throws DBException {
    synchronized (LOCK) {
      threadsOpen++;
      if (session != null) {
        return;
      }
      Properties p = getProperties();
      String hosts = p.getProperty("hosts");
      if (hosts == null) {
        throw new DBException("the property 'hosts' is required (e.g. -p hosts=127.0.0.1)");
      }
      int port = Integer.parseInt(p.getProperty("port", "9042"));
      String keyspace = p.getProperty("cassandra.keyspace", "ycsb");
      // Statements name keyspace.table rather than relying on USE, which Cassandra 5 warns
      // about on every prepared statement.
      table = keyspace + "." + p.getProperty("table", "usertable");
      readConsistency =
          ConsistencyLevel.valueOf(p.getProperty("cassandra.readconsistencylevel", "QUORUM"));
      writeConsistency =
          ConsistencyLevel.valueOf(p.getProperty("cassandra.writeconsistencylevel", "QUORUM"));

      Cluster.Builder builder =
          Cluster.builder().withPort(port).addContactPoints(hosts.split(","));
      String user = p.getProperty("cassandra.username");
      if (user != null) {
        builder = builder.withCredentials(user, p.getProperty("cassandra.password", ""));
      }
      String maxConnections = p.getProperty("cassandra.maxconnections");
      if (maxConnections != null) {
        builder.getConfiguration().getPoolingOptions()
            .setMaxConnectionsPerHost(HostDistance.LOCAL, Integer.parseInt(maxConnections));
      }
      String coreConnections = p.getProperty("cassandra.coreconnections");
      if (coreConnections != null) {
        builder.getConfiguration().getPoolingOptions()
            .setCoreConnectionsPerHost(HostDistance.LOCAL, Integer.parseInt(coreConnections));
      }
      SocketOptions socket = builder.getConfiguration().getSocketOptions();
      String connectTimeout = p.getProperty("cassandra.connecttimeoutmillis");
      if (connectTimeout != null) {
        socket.setConnectTimeoutMillis(Integer.parseInt(connectTimeout));
      }
      String readTimeout = p.getProperty("cassandra.readtimeoutmillis");
      if (readTimeout != null) {
        socket.setReadTimeoutMillis(Integer.parseInt(readTimeout));
      }
      try {
        cluster = builder.build();
        session = cluster.connect();
      } catch (RuntimeException e) {
        if (cluster != null) {
          cluster.close();
        }
        cluster = null;
        throw new DBException("cannot connect to " + hosts + ":" + port + ": " + e, e);
      }
    }
  }

  @Override
  public void cleanup() throws DBException {
    synchronized (LOCK) {
      threadsOpen--;
      if (threadsOpen == 0 && cluster != null) {
        cluster.close();
        cluster = null;
        session = null;
        PREPARED.clear();
      }
    }
  }

  private static PreparedStatement prepare(String cql, ConsistencyLevel consistency) {
    return PREPARED.computeIfAbsent(cql, text -> {
      PreparedStatement statement = session.prepare(text);
      statement.setConsistencyLevel(consistency);
      return statement;
    });
  }

  private static String columns(Set<String> fields) {
    return fields == null ? "*" : String.join(", ", new TreeSet<>(fields));
  }

  private static void readRow(Row row, HashMap<String, ByteIterator> result) {
    for (ColumnDefinitions.Definition column : row.getColumnDefinitions()) {
      String name = column.getName();
      if (name.equals(KEY_COLUMN)) {
        continue;
      }
      ByteBuffer value = row.getBytesUnsafe(name);
      result.put(name, value == null ? null
          : new StringByteIterator(StandardCharsets.UTF_8.decode(value.duplicate()).toString()));
    }
  }

  @Override
  public Status read(String tableName, String key, Set<String> fields,
                     Map<String, ByteIterator> result) {
    try {
      String cql = "SELECT " + columns(fields) + " FROM " + table + " WHERE " + KEY_COLUMN
          + " = ? LIMIT 1";
      ResultSet rows = session.execute(prepare(cql, readConsistency).bind(key));
      Row row = rows.one();
      if (row == null) {
        return Status.NOT_FOUND;
      }
      HashMap<String, ByteIterator> values = new HashMap<>();
      readRow(row, values);
      result.putAll(values);
      return Status.OK;
    } catch (RuntimeException e) {
      System.err.println("read " + key + ": " + e);
      return Status.ERROR;
    }
  }

  @Override
  public Status scan(String tableName, String startKey, int recordCount, Set<String> fields,
                     Vector<HashMap<String, ByteIterator>> result) {
    try {
      String cql = "SELECT " + columns(fields) + " FROM " + table + " WHERE token(" + KEY_COLUMN
          + ") >= token(?) LIMIT ?";
      ResultSet rows = session.execute(prepare(cql, readConsistency).bind(startKey, recordCount));
      for (Row row : rows) {
        HashMap<String, ByteIterator> values = new HashMap<>();
        readRow(row, values);
        result.add(values);
      }
      return Status.OK;
    } catch (RuntimeException e) {
      System.err.println("scan " + startKey + ": " + e);
      return Status.ERROR;
    }
  }

  @Override
  public Status update(String tableName, String key, Map<String, ByteIterator> values) {
    try {
      TreeSet<String> names = new TreeSet<>(values.keySet());
      List<String> sets = new ArrayList<>();
      List<Object> bound = new ArrayList<>();
      for (String name : names) {
        sets.add(name + " = ?");
        bound.add(values.get(name).toString());
      }
      bound.add(key);
      String cql = "UPDATE " + table + " SET " + String.join(", ", sets) + " WHERE " + KEY_COLUMN
          + " = ?";
      BoundStatement statement = prepare(cql, writeConsistency).bind(bound.toArray());
      session.execute(statement);
      return Status.OK;
    } catch (RuntimeException e) {
      System.err.println("update " + key + ": " + e);
      return Status.ERROR;
    }
  }

  @Override
  public Status insert(String tableName, String key, Map<String, ByteIterator> values) {
    try {
      TreeSet<String> names = new TreeSet<>(values.keySet());
      List<Object> bound = new ArrayList<>();
      bound.add(key);
      StringBuilder marks = new StringBuilder("?");
      for (String name : names) {
        bound.add(values.get(name).toString());
        marks.append(", ?");
      }
      String cql = "INSERT INTO " + table + " (" + KEY_COLUMN
          + (names.isEmpty() ? "" : ", " + String.join(", ", names)) + ") VALUES (" + marks + ")";
      session.execute(prepare(cql, writeConsistency).bind(bound.toArray()));
      return Status.OK;
    } catch (RuntimeException e) {
      System.err.println("insert " + key + ": " + e);
      return Status.ERROR;
    }
  }

  @Override
  public Status delete(String tableName, String key) {
    try {
      String cql = "DELETE FROM " + table + " WHERE " + KEY_COLUMN + " = ?";
      session.execute(prepare(cql, writeConsistency).bind(key));
      return Status.OK;
    } catch (RuntimeException e) {
      System.err.println("delete " + key + ": " + e);
      return Status.ERROR;
    }
  }
}
