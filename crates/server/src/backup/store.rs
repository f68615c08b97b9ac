//! Where a backup's files are kept: a local directory (`--to DIR`) or a bucket of an
//! S3-compatible object store (`--to s3://BUCKET/PREFIX`). The backup and the restore name files
//! by keys relative to the backup root (`TAG/HOST_ID/manifest.json`), and the layout is the same
//! in both: a directory's `DIR/TAG/HOST_ID/FILE` is the object `PREFIX/TAG/HOST_ID/FILE`.
//!
//! The S3 side is Apache Arrow's `object_store` crate, configured the way AWS's own tools are,
//! from the node process's environment: `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`
//! (`AWS_SESSION_TOKEN`), `AWS_REGION` or `AWS_DEFAULT_REGION`, and `AWS_ENDPOINT_URL` for a
//! store other than Amazon's (plain `http://` is allowed when the endpoint says so); the node
//! config's `[backup] s3_endpoint` and `s3_region` take the place of the last two. Requests
//! are bounded: a connection must open within [`S3_CONNECT_TIMEOUT`], a request answer within
//! [`S3_REQUEST_TIMEOUT`], and a failed one is retried [`S3_RETRIES_MAX`] times within
//! [`S3_RETRY_TIMEOUT`], so that an unreachable endpoint fails a backup in seconds, not minutes.
//!
//! A data file is written as it is produced, never held whole: to a directory through a
//! temporary file renamed when complete, to S3 in parts of [`S3_PART_BYTES`] (a multipart
//! upload, or one PUT when the file is smaller), which S3 makes visible only when complete.
//! A manifest is written whole and atomically in both.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use object_store::aws::{AmazonS3, AmazonS3Builder, AmazonS3ConfigKey};
use object_store::path::Path as ObjectPath;
use object_store::{ClientConfigKey, MultipartUpload, ObjectStore, ObjectStoreExt, PutPayload, RetryConfig};

use crate::config::BackupConfig;

/// How a location names a bucket rather than a directory.
const S3_SCHEME: &str = "s3://";
/// A data file goes to S3 in parts of this size (S3 asks at least 5 MiB of every part but the
/// last; some stores, R2 among them, want them all the same size). At most this much of a file
/// is held in memory while it uploads.
pub const S3_PART_BYTES: usize = 16 << 20;
/// S3's limit on the parts of one upload: a data file may be 160 GiB at most.
pub const S3_PARTS_MAX: usize = 10_000;
pub const S3_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
pub const S3_REQUEST_TIMEOUT: Duration = Duration::from_secs(120);
pub const S3_RETRIES_MAX: usize = 3;
pub const S3_RETRY_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a store operation failed, naming the file or object (`location`) it was about.
#[derive(Debug)]
#[non_exhaustive]
pub enum StoreError {
    /// The file or object is not there.
    NotFound { location: String },
    /// A location that names no directory or bucket.
    BadLocation { location: String, reason: String },
    Io {
        location: String,
        source: std::io::Error,
    },
    S3 {
        location: String,
        source: object_store::Error,
    },
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreError::NotFound { location } => write!(f, "{location}: not found"),
            StoreError::BadLocation { location, reason } => write!(f, "{location}: {reason}"),
            StoreError::Io { location, source } => write!(f, "{location}: {source}"),
            StoreError::S3 { location, source } => write!(f, "{location}: {}", explain_s3(source)),
        }
    }
}

impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StoreError::Io { source, .. } => Some(source),
            StoreError::S3 { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl From<StoreError> for String {
    fn from(e: StoreError) -> String {
        e.to_string()
    }
}

/// An S3 error as a sentence that says what to do, with the store's own words after it.
fn explain_s3(e: &object_store::Error) -> String {
    let mut detail = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        let text = s.to_string();
        if !detail.contains(&text) {
            detail = format!("{detail}: {text}");
        }
        source = s.source();
    }
    let detail = compact(&detail);
    let hint = if detail.contains("NoSuchBucket") {
        "no such bucket: create it first, or check the bucket's name and the endpoint (AWS_ENDPOINT_URL)"
    } else if matches!(
        e,
        object_store::Error::PermissionDenied { .. } | object_store::Error::Unauthenticated { .. }
    ) || ["InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied"]
        .iter()
        .any(|c| detail.contains(c))
    {
        "the object store refused the node's credentials: check AWS_ACCESS_KEY_ID and \
         AWS_SECRET_ACCESS_KEY in the node's environment, and the bucket's permissions"
    } else if [
        "connect",
        "Connect",
        "dns error",
        "timed out",
        "operation timed out",
    ]
    .iter()
    .any(|c| detail.contains(c))
    {
        "the object store could not be reached: check the endpoint (AWS_ENDPOINT_URL, AWS_REGION) \
         and the network from the node"
    } else if matches!(e, object_store::Error::NotFound { .. }) {
        "not found"
    } else {
        "the object store refused the request"
    };
    format!("{hint} ({detail})")
}

/// `detail` on one line, an S3 error document in it cut down to its code and message.
fn compact(detail: &str) -> String {
    let within = |tag: &str| {
        let open = format!("<{tag}>");
        let start = detail.find(&open)? + open.len();
        let len = detail[start..].find(&format!("</{tag}>"))?;
        Some(&detail[start..start + len])
    };
    let short = match (
        detail.find("<?xml").or_else(|| detail.find("<Error>")),
        within("Code"),
    ) {
        (Some(at), Some(code)) => {
            let message = within("Message").unwrap_or_default();
            format!("{}{code}: {message}", &detail[..at])
        }
        _ => detail.to_owned(),
    };
    short.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Where a backup's files are.
#[derive(Debug)]
pub enum Store {
    /// A directory of this node's machine.
    Dir(PathBuf),
    S3(S3),
}

/// A bucket, and the prefix (with no `/` at either end, perhaps empty) its keys are under.
#[derive(Debug)]
pub struct S3 {
    client: AmazonS3,
    bucket: String,
    prefix: String,
}

/// Splits a backup's location (`DIR/TAG` or `s3://BUCKET/PREFIX/TAG`) into its root and its tag.
pub fn split_tag(from: &str) -> Option<(&str, &str)> {
    let from = from.trim_end_matches('/');
    let (root, tag) = from.rsplit_once('/')?;
    // `s3://BUCKET` alone names no backup in the bucket.
    let bucket_only = from
        .strip_prefix(S3_SCHEME)
        .is_some_and(|rest| !rest.contains('/'));
    (!tag.is_empty() && !root.is_empty() && !bucket_only).then_some((root, tag))
}

impl Store {
    /// The store a location names: `s3://BUCKET[/PREFIX]` or a directory.
    pub fn open(location: &str, settings: &BackupConfig) -> Result<Store, StoreError> {
        match location.strip_prefix(S3_SCHEME) {
            None => Ok(Store::Dir(PathBuf::from(location))),
            Some(rest) => {
                let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
                if bucket.is_empty() {
                    return Err(StoreError::BadLocation {
                        location: location.to_owned(),
                        reason: "name the bucket: s3://BUCKET/PREFIX".to_owned(),
                    });
                }
                let prefix = prefix.trim_matches('/').to_owned();
                let client = s3_client(bucket, settings).map_err(|source| StoreError::S3 {
                    location: location.to_owned(),
                    source,
                })?;
                Ok(Store::S3(S3 {
                    client,
                    bucket: bucket.to_owned(),
                    prefix,
                }))
            }
        }
    }

    /// How a key is named to a person: a path, or an `s3://` URL.
    pub fn name(&self, key: &str) -> String {
        match self {
            Store::Dir(root) if key.is_empty() => root.display().to_string(),
            Store::Dir(root) => root.join(key).display().to_string(),
            Store::S3(s3) => {
                let key = s3.key(key);
                format!("{S3_SCHEME}{}/{key}", s3.bucket)
                    .trim_end_matches('/')
                    .to_owned()
            }
        }
    }

    /// Fails unless the store can be read: the bucket exists and the credentials are taken
    /// (a directory is checked as it is used).
    pub async fn check(&self) -> Result<(), StoreError> {
        match self {
            Store::Dir(_) => Ok(()),
            Store::S3(s3) => {
                let prefix = s3.path("");
                s3.client
                    .list_with_delimiter(Some(&prefix))
                    .await
                    .map(|_| ())
                    .map_err(|source| s3.error(self.name(""), source))
            }
        }
    }

    /// The whole of a file.
    pub async fn get(&self, key: &str) -> Result<Vec<u8>, StoreError> {
        match self {
            Store::Dir(root) => std::fs::read(root.join(key)).map_err(|e| io_error(&root.join(key), e)),
            Store::S3(s3) => {
                let got = async { s3.client.get(&s3.path(key)).await?.bytes().await }.await;
                got.map(|b| b.to_vec()).map_err(|e| s3.error(self.name(key), e))
            }
        }
    }

    pub async fn exists(&self, key: &str) -> Result<bool, StoreError> {
        match self {
            Store::Dir(root) => Ok(root.join(key).exists()),
            Store::S3(s3) => match s3.client.head(&s3.path(key)).await {
                Ok(_) => Ok(true),
                Err(object_store::Error::NotFound { .. }) => Ok(false),
                Err(e) => Err(s3.error(self.name(key), e)),
            },
        }
    }

    /// The names directly under `key` that hold files (a directory's subdirectories), sorted.
    pub async fn children(&self, key: &str) -> Result<Vec<String>, StoreError> {
        let mut names = match self {
            Store::Dir(root) => std::fs::read_dir(root.join(key))
                .map_err(|e| io_error(&root.join(key), e))?
                .flatten()
                .filter(|d| d.path().is_dir())
                .map(|d| d.file_name().to_string_lossy().into_owned())
                .collect::<Vec<_>>(),
            Store::S3(s3) => {
                let listed = s3
                    .client
                    .list_with_delimiter(Some(&s3.path(key)))
                    .await
                    .map_err(|e| s3.error(self.name(key), e))?;
                listed
                    .common_prefixes
                    .iter()
                    .filter_map(|p| p.filename().map(str::to_owned))
                    .collect()
            }
        };
        names.sort();
        Ok(names)
    }

    /// Writes a small file whole and atomically (a reader sees all of it or none).
    pub async fn put(&self, key: &str, bytes: Vec<u8>) -> Result<(), StoreError> {
        match self {
            Store::Dir(root) => {
                let path = root.join(key);
                if let Some(dir) = path.parent() {
                    std::fs::create_dir_all(dir).map_err(|e| io_error(dir, e))?;
                }
                hayate_storage::files::write_atomically(&path, &bytes).map_err(|e| io_error(&path, e))
            }
            Store::S3(s3) => s3
                .client
                .put(&s3.path(key), PutPayload::from(bytes))
                .await
                .map(|_| ())
                .map_err(|e| s3.error(self.name(key), e)),
        }
    }

    /// Starts writing a file that is complete only once [`Upload::finish`] returns.
    pub fn create(&self, key: &str) -> Result<Upload, StoreError> {
        match self {
            Store::Dir(root) => {
                let path = root.join(key);
                if let Some(dir) = path.parent() {
                    std::fs::create_dir_all(dir).map_err(|e| io_error(dir, e))?;
                }
                let mut tmp = path.clone().into_os_string();
                tmp.push(".tmp");
                let tmp = PathBuf::from(tmp);
                let file = File::create(&tmp).map_err(|e| io_error(&tmp, e))?;
                Ok(Upload::File {
                    out: BufWriter::with_capacity(1 << 20, file),
                    tmp,
                    path,
                })
            }
            Store::S3(s3) => Ok(Upload::S3(S3Upload {
                client: s3.client.clone(),
                path: s3.path(key),
                location: self.name(key),
                buffer: Vec::new(),
                multipart: None,
                parts: 0,
            })),
        }
    }
}

impl S3 {
    fn key(&self, key: &str) -> String {
        match (self.prefix.is_empty(), key.is_empty()) {
            (true, _) => key.to_owned(),
            (false, true) => self.prefix.clone(),
            (false, false) => format!("{}/{key}", self.prefix),
        }
    }

    fn path(&self, key: &str) -> ObjectPath {
        ObjectPath::from(self.key(key))
    }

    fn error(&self, location: String, source: object_store::Error) -> StoreError {
        match source {
            object_store::Error::NotFound { .. } if !format!("{source:?}").contains("NoSuchBucket") => {
                StoreError::NotFound { location }
            }
            source => StoreError::S3 { location, source },
        }
    }
}

fn io_error(path: &Path, source: std::io::Error) -> StoreError {
    StoreError::Io {
        location: path.display().to_string(),
        source,
    }
}

/// An S3 client for `bucket` as the node's environment and settings configure it.
fn s3_client(bucket: &str, settings: &BackupConfig) -> Result<AmazonS3, object_store::Error> {
    s3_client_from(AmazonS3Builder::from_env(), bucket, settings)
}

fn s3_client_from(
    builder: AmazonS3Builder,
    bucket: &str,
    settings: &BackupConfig,
) -> Result<AmazonS3, object_store::Error> {
    // reqwest's rustls is built without a crypto provider of its own (see Cargo.toml): it takes
    // the process's default, which is ring, as for client TLS. Installing it twice is harmless.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut builder = builder.with_bucket_name(bucket);
    if let Some(endpoint) = &settings.s3_endpoint {
        builder = builder.with_endpoint(endpoint);
    }
    if let Some(region) = &settings.s3_region {
        builder = builder.with_region(region);
    }
    let endpoint = builder.get_config_value(&AmazonS3ConfigKey::Endpoint);
    let http = endpoint.as_deref().is_some_and(|e| e.starts_with("http://"));
    let client_key = AmazonS3ConfigKey::Client;
    let secs = |d: Duration| format!("{}s", d.as_secs());
    builder
        .with_config(
            client_key(ClientConfigKey::ConnectTimeout),
            secs(S3_CONNECT_TIMEOUT),
        )
        .with_config(client_key(ClientConfigKey::Timeout), secs(S3_REQUEST_TIMEOUT))
        .with_retry(RetryConfig {
            max_retries: S3_RETRIES_MAX,
            retry_timeout: S3_RETRY_TIMEOUT,
            ..RetryConfig::default()
        })
        .with_allow_http(http)
        .build()
}

/// A file being written.
pub enum Upload {
    File {
        out: BufWriter<File>,
        tmp: PathBuf,
        path: PathBuf,
    },
    S3(S3Upload),
}

pub struct S3Upload {
    client: AmazonS3,
    path: ObjectPath,
    location: String,
    /// What is not uploaded yet: less than a part, but for a moment.
    buffer: Vec<u8>,
    multipart: Option<Box<dyn MultipartUpload>>,
    parts: usize,
}

impl Upload {
    /// Appends `bytes`.
    pub async fn write(&mut self, bytes: &[u8]) -> Result<(), StoreError> {
        match self {
            Upload::File { out, tmp, .. } => out.write_all(bytes).map_err(|e| io_error(tmp, e)),
            Upload::S3(u) => {
                u.buffer.extend_from_slice(bytes);
                while u.buffer.len() >= S3_PART_BYTES {
                    let rest = u.buffer.split_off(S3_PART_BYTES);
                    let part = std::mem::replace(&mut u.buffer, rest);
                    u.put_part(part).await?;
                }
                Ok(())
            }
        }
    }

    /// Makes the file whole where it belongs.
    pub async fn finish(self) -> Result<(), StoreError> {
        match self {
            Upload::File { out, tmp, path } => {
                let file = out.into_inner().map_err(|e| io_error(&tmp, e.into_error()))?;
                file.sync_all().map_err(|e| io_error(&tmp, e))?;
                std::fs::rename(&tmp, &path).map_err(|e| io_error(&tmp, e))
            }
            Upload::S3(mut u) => {
                let buffer = std::mem::take(&mut u.buffer);
                let done = match u.multipart.is_some() {
                    false => u.client.put(&u.path, PutPayload::from(buffer)).await.map(|_| ()),
                    true => {
                        if !buffer.is_empty() {
                            u.put_part(buffer).await?;
                        }
                        let upload = u.multipart.as_mut().expect("a multipart upload was started");
                        upload.complete().await.map(|_| ())
                    }
                };
                match done {
                    Ok(()) => Ok(()),
                    Err(source) => Err(u.fail(source).await),
                }
            }
        }
    }

    /// Gives up on the file: nothing of it is left where it would have been.
    pub async fn abort(self) {
        match self {
            Upload::File { tmp, .. } => {
                let _ = std::fs::remove_file(&tmp);
            }
            Upload::S3(mut u) => {
                if let Some(upload) = u.multipart.as_mut() {
                    if let Err(e) = upload.abort().await {
                        tracing::warn!("{}: could not abort its multipart upload: {e}", u.location);
                    }
                }
            }
        }
    }
}

impl S3Upload {
    async fn put_part(&mut self, part: Vec<u8>) -> Result<(), StoreError> {
        if self.parts == S3_PARTS_MAX {
            return Err(StoreError::BadLocation {
                location: self.location.clone(),
                reason: format!(
                    "larger than {S3_PARTS_MAX} parts of {} MiB, more than one S3 upload may hold",
                    S3_PART_BYTES >> 20
                ),
            });
        }
        if self.multipart.is_none() {
            match self.client.put_multipart(&self.path).await {
                Ok(upload) => self.multipart = Some(upload),
                Err(source) => {
                    return Err(StoreError::S3 {
                        location: self.location.clone(),
                        source,
                    })
                }
            }
        }
        let upload = self.multipart.as_mut().expect("a multipart upload was started");
        let sent = upload.put_part(PutPayload::from(part)).await;
        self.parts += 1;
        match sent {
            Ok(()) => Ok(()),
            Err(source) => Err(self.fail(source).await),
        }
    }

    /// Aborts the multipart upload (so the store does not keep its parts) after `source`.
    async fn fail(&mut self, source: object_store::Error) -> StoreError {
        if let Some(mut upload) = self.multipart.take() {
            if let Err(e) = upload.abort().await {
                tracing::warn!("{}: could not abort its multipart upload: {e}", self.location);
            }
        }
        StoreError::S3 {
            location: self.location.clone(),
            source,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_backup_location_splits_into_its_root_and_tag() {
        assert_eq!(split_tag("/backups/monday"), Some(("/backups", "monday")));
        assert_eq!(split_tag("/backups/monday/"), Some(("/backups", "monday")));
        assert_eq!(
            split_tag("s3://bucket/prefix/monday"),
            Some(("s3://bucket/prefix", "monday"))
        );
        assert_eq!(split_tag("s3://bucket/monday"), Some(("s3://bucket", "monday")));
        assert_eq!(split_tag("s3://bucket"), None);
        assert_eq!(split_tag("monday"), None);
    }

    #[test]
    fn s3_keys_sit_under_the_prefix() {
        let open = |l: &str| match Store::open(l, &BackupConfig::default()) {
            Ok(Store::S3(s3)) => s3,
            other => panic!("{l}: {other:?}"),
        };
        let s3 = open("s3://bucket/a/b/");
        assert_eq!(s3.key("t/h/manifest.json"), "a/b/t/h/manifest.json");
        assert_eq!(s3.key(""), "a/b");
        let root = open("s3://bucket");
        assert_eq!(root.key("t/h/x.hyb"), "t/h/x.hyb");
        let store = Store::S3(s3);
        assert_eq!(store.name("t/h/x.hyb"), "s3://bucket/a/b/t/h/x.hyb");
        assert!(matches!(
            Store::open("s3:///x", &BackupConfig::default()),
            Err(StoreError::BadLocation { .. })
        ));
    }

    #[tokio::test]
    async fn a_directory_store_keeps_the_layout_and_writes_files_whole() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store =
            Store::open(&dir.path().to_string_lossy(), &BackupConfig::default()).expect("a directory");
        let mut up = store.create("t1/h1/ks.t.hyb").expect("create");
        up.write(b"hello ").await.expect("write");
        assert!(
            !store.exists("t1/h1/ks.t.hyb").await.expect("exists"),
            "visible before finish"
        );
        up.write(b"world").await.expect("write");
        up.finish().await.expect("finish");
        store
            .put("t1/h1/manifest.json", b"{}".to_vec())
            .await
            .expect("put");
        assert_eq!(store.get("t1/h1/ks.t.hyb").await.expect("get"), b"hello world");
        assert_eq!(
            std::fs::read(dir.path().join("t1/h1/manifest.json")).expect("read"),
            b"{}"
        );
        assert_eq!(store.children("").await.expect("children"), vec!["t1"]);
        assert_eq!(store.children("t1").await.expect("children"), vec!["h1"]);
        let aborted = store.create("t1/h1/other.hyb").expect("create");
        aborted.abort().await;
        assert_eq!(
            std::fs::read_dir(dir.path().join("t1/h1"))
                .expect("read_dir")
                .count(),
            2,
            "an aborted file left something behind"
        );
    }

    #[test]
    fn an_s3_error_document_is_cut_to_its_code_and_message() {
        let detail =
            "GET http://h/b - 404 Not Found: <?xml version=\"1.0\"?>\n<Error><Code>NoSuchBucket</Code>\
                      <Message>The specified bucket does not exist</Message><RequestId>x</RequestId></Error>";
        assert_eq!(
            compact(detail),
            "GET http://h/b - 404 Not Found: NoSuchBucket: The specified bucket does not exist"
        );
        assert_eq!(compact("refused\n  again"), "refused again");
    }

    /// An endpoint nothing listens on fails a backup within seconds, saying what to check,
    /// rather than after object_store's default three minutes of retries.
    #[tokio::test]
    async fn an_unreachable_endpoint_is_named_quickly() {
        let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = closed.local_addr().expect("addr").port();
        drop(closed);
        let settings = BackupConfig {
            s3_endpoint: Some(format!("http://127.0.0.1:{port}")),
            s3_region: Some("us-east-1".to_owned()),
        };
        // Credentials of its own, not the environment's: without any, the client would ask the
        // instance metadata service, which is no address of this machine.
        let credentials = AmazonS3Builder::new()
            .with_access_key_id("hayate-test")
            .with_secret_access_key("hayate-test-secret");
        let store = Store::S3(S3 {
            client: s3_client_from(credentials, "bucket", &settings).expect("a client"),
            bucket: "bucket".to_owned(),
            prefix: "prefix".to_owned(),
        });
        let started = std::time::Instant::now();
        let e = store.check().await.expect_err("nothing listens there");
        assert!(
            started.elapsed() < S3_RETRY_TIMEOUT,
            "took {:?}",
            started.elapsed()
        );
        let message = e.to_string();
        assert!(
            message.starts_with("s3://bucket/prefix: the object store could not be reached"),
            "{message}"
        );
    }
}
