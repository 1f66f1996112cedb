//! One Redis server shared by the gateway's replicas: the connection both the ingest ledger
//! ([`crate::ingest::RedisLedger`]) and the limits ([`crate::limits`]) run their commands on.
//!
//! `redis://` or `rediss://` (TLS through rustls, verified against the system's roots or a given
//! CA). Connects lazily, on first use; every command is bounded by the store's timeout, and a
//! connection that failed is dropped so that the next command reconnects. The URL, which may hold
//! a password, is never logged, printed or kept outside the client.

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, FromRedisValue};

/// Why the store cannot serve.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The URL is not `redis[s]://host...`, or a CA was given for a plain `redis://` URL.
    #[error("the Redis URL is invalid (expected redis[s]://[[user]:password@]host[:port][/db])")]
    InvalidUrl,
    /// The server could not be reached or did not answer in time.
    #[error("the Redis server is unavailable")]
    Unavailable,
}

/// A lazily connected Redis client with a bound on every command.
pub struct RedisStore {
    client: redis::Client,
    config: AsyncConnectionConfig,
    connection: tokio::sync::Mutex<Option<MultiplexedConnection>>,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RedisStore")
    }
}

impl RedisStore {
    /// A store on the server at `url`, trusting only the CA certificates in `ca_pem` for
    /// `rediss://` when given; connecting and each command are bounded by `timeout`.
    pub fn open(url: &str, ca_pem: Option<Vec<u8>>, timeout: Duration) -> Result<RedisStore, StoreError> {
        let parsed = url::Url::parse(url).map_err(|_| StoreError::InvalidUrl)?;
        let tls = match parsed.scheme() {
            "redis" => false,
            "rediss" => true,
            _ => return Err(StoreError::InvalidUrl),
        };
        if parsed.host_str().is_none_or(str::is_empty) || (ca_pem.is_some() && !tls) {
            return Err(StoreError::InvalidUrl);
        }
        if tls && rustls::crypto::CryptoProvider::get_default().is_none() {
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
        let client = match ca_pem {
            Some(root_cert) => redis::Client::build_with_tls(
                url,
                redis::TlsCertificates { client_tls: None, root_cert: Some(root_cert) },
            ),
            None => redis::Client::open(url),
        }
        .map_err(|_| StoreError::InvalidUrl)?;
        let config =
            AsyncConnectionConfig::new().set_connection_timeout(Some(timeout)).set_response_timeout(Some(timeout));
        Ok(RedisStore { client, config, connection: tokio::sync::Mutex::new(None) })
    }

    async fn connection(&self) -> Result<MultiplexedConnection, StoreError> {
        let mut slot = self.connection.lock().await;
        if let Some(connection) = slot.as_ref() {
            return Ok(connection.clone());
        }
        let connection = self
            .client
            .get_multiplexed_async_connection_with_config(&self.config)
            .await
            .map_err(|_| StoreError::Unavailable)?;
        *slot = Some(connection.clone());
        Ok(connection)
    }

    /// Run `command`; any failure is [`StoreError::Unavailable`] (its text, which may name the
    /// server, is dropped).
    pub async fn run<T: FromRedisValue>(&self, command: &redis::Cmd) -> Result<T, StoreError> {
        let mut connection = self.connection().await?;
        match command.query_async(&mut connection).await {
            Ok(value) => Ok(value),
            Err(err) => {
                if err.is_io_error() || err.is_connection_dropped() || err.is_unrecoverable_error() || err.is_timeout()
                {
                    *self.connection.lock().await = None;
                }
                Err(StoreError::Unavailable)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_redis_urls_with_a_host_are_accepted() {
        let timeout = Duration::from_millis(100);
        for bad in ["http://h:6379", "redis://", "not a url", "unix:///tmp/redis.sock"] {
            assert_eq!(RedisStore::open(bad, None, timeout).err(), Some(StoreError::InvalidUrl), "{bad}");
        }
        assert_eq!(
            RedisStore::open("redis://h:6379", Some(b"pem".to_vec()), timeout).err(),
            Some(StoreError::InvalidUrl)
        );
        assert!(RedisStore::open("redis://:pw@h:6379/1", None, timeout).is_ok());
    }
}
