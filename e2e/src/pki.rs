//! Secrets of a control plane: the admin token, the service account signing key (made with the `openssl` CLI)
//! and the CA taken from the API server's self-signed serving certificate.

use std::io::Read;
use std::path::Path;

use crate::error::Error;

/// A random 128-bit token as 32 hex digits, read from `/dev/urandom`.
pub(crate) fn random_token() -> Result<String, Error> {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|e| Error::io("reading /dev/urandom", e))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Writes a new 2048-bit RSA private key (PKCS#8 PEM) to `path`. kube-apiserver signs service account tokens
/// with it (`--service-account-signing-key-file`) and derives the verifying key from it
/// (`--service-account-key-file`).
pub(crate) async fn rsa_private_key(path: &Path) -> Result<(), Error> {
    let mut command = tokio::process::Command::new("openssl");
    command.args(["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out"]).arg(path);
    let shown = "openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048".to_owned();
    let output = command
        .output()
        .await
        .map_err(|e| Error::Spawn { program: format!("{shown} (is the openssl CLI installed?)"), source: e.into() })?;
    if output.status.success() {
        Ok(())
    } else {
        Err(Error::Command {
            command: shown,
            status: output.status.to_string(),
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        })
    }
}

/// The PEM certificates after the first one in `bundle` (kube-apiserver's `apiserver.crt` is the serving
/// certificate followed by the CA that signed it), or `None` while the file is missing or incomplete.
/// rustls wants the CA on its own, not the leaf.
pub(crate) fn ca_of_bundle(bundle: &Path) -> Option<String> {
    let text = std::fs::read_to_string(bundle).ok()?;
    const END: &str = "-----END CERTIFICATE-----";
    let blocks: Vec<String> = text
        .split_inclusive(END)
        .map(str::trim)
        .filter(|block| block.starts_with("-----BEGIN CERTIFICATE-----") && block.ends_with(END))
        .map(|block| format!("{block}\n"))
        .collect();
    (blocks.len() >= 2).then(|| blocks[1..].concat())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_random_hex() {
        let a = random_token().expect("token");
        let b = random_token().expect("token");
        assert_eq!(a.len(), 32);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }

    #[tokio::test]
    async fn rsa_key_is_written_as_pem() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("sa.key");
        rsa_private_key(&path).await.expect("openssl genpkey");
        let pem = std::fs::read_to_string(&path).expect("read");
        assert!(pem.starts_with("-----BEGIN PRIVATE KEY-----"), "{pem}");
    }

    #[test]
    fn ca_is_everything_after_the_leaf() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("apiserver.crt");
        let cert = |body: &str| format!("-----BEGIN CERTIFICATE-----\n{body}\n-----END CERTIFICATE-----\n");
        std::fs::write(&path, cert("leaf")).expect("write");
        assert_eq!(ca_of_bundle(&path), None, "only a leaf: not complete yet");
        std::fs::write(&path, cert("leaf") + &cert("ca")).expect("write");
        assert_eq!(ca_of_bundle(&path), Some(cert("ca")));
        assert_eq!(ca_of_bundle(&dir.path().join("missing")), None);
    }
}
