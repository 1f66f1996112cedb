//! The pinned Kubernetes and etcd versions, read from `e2e/control-plane/versions.env`, the same file that
//! `provide.sh` sources, so the script and this crate can never disagree about which binaries to use.

/// The contents of `e2e/control-plane/versions.env`, compiled in.
const VERSIONS_ENV: &str = include_str!("../control-plane/versions.env");

/// The versions of the control plane binaries this crate expects (without a leading `v`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PinnedVersions {
    /// Kubernetes version of `kube-apiserver`, e.g. `1.36.3`.
    pub kubernetes: &'static str,
    /// etcd version, e.g. `3.6.8`.
    pub etcd: &'static str,
}

/// The versions pinned in `e2e/control-plane/versions.env`.
pub fn pinned_versions() -> PinnedVersions {
    PinnedVersions {
        kubernetes: lookup(VERSIONS_ENV, "KUBERNETES_VERSION")
            .expect("versions.env sets KUBERNETES_VERSION (checked by a unit test)"),
        etcd: lookup(VERSIONS_ENV, "ETCD_VERSION").expect("versions.env sets ETCD_VERSION (checked by a unit test)"),
    }
}

/// The value of `key` in a `KEY=VALUE` file with `#` comments.
fn lookup(text: &'static str, key: &str) -> Option<&'static str> {
    text.lines()
        .map(str::trim)
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| line.split_once('='))
        .find(|(k, _)| k.trim() == key)
        .map(|(_, v)| v.trim())
        .filter(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_env_pins_both_versions_as_plain_numbers() {
        let v = pinned_versions();
        for version in [v.kubernetes, v.etcd] {
            assert_eq!(version.split('.').count(), 3, "{version}");
            assert!(version.split('.').all(|part| part.parse::<u32>().is_ok()), "{version}");
        }
        assert!(v.kubernetes.starts_with("1."));
    }

    #[test]
    fn lookup_ignores_comments_and_missing_keys() {
        let text = "# KUBERNETES_VERSION=9.9.9\nKUBERNETES_VERSION = 1.2.3\nEMPTY=\n";
        assert_eq!(lookup(text, "KUBERNETES_VERSION"), Some("1.2.3"));
        assert_eq!(lookup(text, "EMPTY"), None);
        assert_eq!(lookup(text, "ETCD_VERSION"), None);
    }
}
