package hayate;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.datastax.oss.driver.api.core.AllNodesFailedException;
import com.datastax.oss.driver.api.core.CqlSession;
import com.datastax.oss.driver.api.core.config.DefaultDriverOption;
import com.datastax.oss.driver.api.core.config.DriverConfigLoader;
import java.io.InputStream;
import java.net.InetSocketAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyFactory;
import java.security.KeyStore;
import java.security.PrivateKey;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.security.spec.PKCS8EncodedKeySpec;
import java.time.Duration;
import java.util.Base64;
import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManagerFactory;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Both Java drivers over TLS, to a node that requires client certificates: the DataStax 3.11
 * driver with JDK SSL options (as YCSB would be configured) and the Apache 4.18 driver with an
 * SSLContext. tests/python/test_tls.py starts the node and its CA, and passes the PEM files as
 * hayate.tls.ca, hayate.tls.cert and hayate.tls.key; without them the class is skipped.
 */
class TlsTest {
  static final String HOST = System.getProperty("hayate.host", "127.0.0.1");
  static final int PORT = Integer.getInteger("hayate.port", 9042);
  static final String CA = System.getProperty("hayate.tls.ca", "");
  static final String CERT = System.getProperty("hayate.tls.cert", "");
  static final String KEY = System.getProperty("hayate.tls.key", "");

  @BeforeAll
  static void given() {
    assumeTrue(!CA.isEmpty(), "no TLS node given (hayate.tls.ca)");
  }

  /** The CA as trust, and, if withClientCert, the client's certificate and EC key as identity. */
  static SSLContext context(boolean withClientCert) throws Exception {
    CertificateFactory x509 = CertificateFactory.getInstance("X.509");
    KeyStore trust = KeyStore.getInstance("PKCS12");
    trust.load(null, null);
    try (InputStream in = Files.newInputStream(Path.of(CA))) {
      trust.setCertificateEntry("ca", x509.generateCertificate(in));
    }
    TrustManagerFactory tmf = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
    tmf.init(trust);
    KeyManagerFactory kmf = null;
    if (withClientCert) {
      String pem = Files.readString(Path.of(KEY));
      String base64 = pem.replaceAll("-----[A-Z ]+-----", "").replaceAll("\\s", "");
      PrivateKey key = KeyFactory.getInstance("EC")
          .generatePrivate(new PKCS8EncodedKeySpec(Base64.getDecoder().decode(base64)));
      Certificate cert;
      try (InputStream in = Files.newInputStream(Path.of(CERT))) {
        cert = x509.generateCertificate(in);
      }
      KeyStore identity = KeyStore.getInstance("PKCS12");
      identity.load(null, null);
      identity.setKeyEntry("client", key, new char[0], new Certificate[] {cert});
      kmf = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
      kmf.init(identity, new char[0]);
    }
    SSLContext context = SSLContext.getInstance("TLS");
    context.init(kmf == null ? null : kmf.getKeyManagers(), tmf.getTrustManagers(), null);
    return context;
  }

  static CqlSession session4(SSLContext context) {
    DriverConfigLoader config = DriverConfigLoader.programmaticBuilder()
        .withDuration(DefaultDriverOption.REQUEST_TIMEOUT, Duration.ofSeconds(20))
        .withDuration(DefaultDriverOption.CONNECTION_INIT_QUERY_TIMEOUT, Duration.ofSeconds(10))
        .build();
    return CqlSession.builder()
        .addContactPoint(new InetSocketAddress(HOST, PORT))
        .withLocalDatacenter("datacenter1")
        .withConfigLoader(config)
        .withSslContext(context)
        .build();
  }

  @Test
  void driver4WithAClientCertificateQueries() throws Exception {
    try (CqlSession session = session4(context(true))) {
      String name = session.execute("SELECT cluster_name FROM system.local").one().getString(0);
      assertEquals("hayate", name);
    }
  }

  @Test
  void driver4WithoutAClientCertificateIsRefused() throws Exception {
    SSLContext noCert = context(false);
    assertThrows(AllNodesFailedException.class, () -> session4(noCert).close());
  }

  @Test
  void driver3WithAClientCertificateQueries() throws Exception {
    com.datastax.driver.core.RemoteEndpointAwareJdkSSLOptions ssl =
        com.datastax.driver.core.RemoteEndpointAwareJdkSSLOptions.builder()
            .withSSLContext(context(true))
            .build();
    try (com.datastax.driver.core.Cluster cluster = com.datastax.driver.core.Cluster.builder()
            .addContactPoint(HOST)
            .withPort(PORT)
            .withSSL(ssl)
            .build();
        com.datastax.driver.core.Session session = cluster.connect()) {
      String name = session.execute("SELECT cluster_name FROM system.local").one().getString(0);
      assertEquals("hayate", name);
    }
  }
}
