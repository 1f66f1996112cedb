//! Finding `kube-apiserver` and `etcd`: the `KUBEBUILDER_ASSETS` folder (envtest convention) first, then the cache
//! folder that `e2e/control-plane/provide.sh` fills for the pinned version. This module never builds anything.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::error::Error;
use crate::versions::pinned_versions;

/// Names of the two binaries a folder must hold.
const BINARIES: [&str; 2] = ["kube-apiserver", "etcd"];

/// A folder holding both `kube-apiserver` and `etcd`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binaries {
    dir: PathBuf,
}

impl Binaries {
    /// Finds the binaries from the process environment: `KUBEBUILDER_ASSETS`, then
    /// `${XDG_CACHE_HOME:-$HOME/.cache}/memgate/k8s-v<pinned version>/bin`.
    pub fn discover() -> Result<Self, Error> {
        discover_in(
            std::env::var_os("KUBEBUILDER_ASSETS"),
            cache_bin_dir(std::env::var_os("XDG_CACHE_HOME"), std::env::var_os("HOME")),
        )
    }

    /// Uses `dir` as is, failing when it does not hold both binaries.
    pub fn in_dir(dir: impl Into<PathBuf>) -> Result<Self, Error> {
        let dir = dir.into();
        match missing_in(&dir) {
            None => Ok(Self { dir }),
            Some(missing) => Err(not_found(vec![format!("{} ({missing})", dir.display())])),
        }
    }

    /// The folder holding both binaries.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Path of the `kube-apiserver` binary.
    pub fn kube_apiserver(&self) -> PathBuf {
        self.dir.join("kube-apiserver")
    }

    /// Path of the `etcd` binary.
    pub fn etcd(&self) -> PathBuf {
        self.dir.join("etcd")
    }
}

/// The cache folder `provide.sh` uses for the pinned version, mirroring `${XDG_CACHE_HOME:-$HOME/.cache}`.
pub(crate) fn cache_bin_dir(xdg_cache_home: Option<OsString>, home: Option<OsString>) -> Option<PathBuf> {
    let cache = match xdg_cache_home.filter(|v| !v.is_empty()) {
        Some(xdg) => PathBuf::from(xdg),
        None => PathBuf::from(home.filter(|v| !v.is_empty())?).join(".cache"),
    };
    Some(cache.join("memgate").join(format!("k8s-v{}", pinned_versions().kubernetes)).join("bin"))
}

/// The discovery order, with its inputs passed in so it can be tested without touching the environment.
pub(crate) fn discover_in(assets: Option<OsString>, cache: Option<PathBuf>) -> Result<Binaries, Error> {
    let mut looked_in = Vec::new();
    if let Some(assets) = assets.filter(|v| !v.is_empty()) {
        let dir = PathBuf::from(assets);
        match missing_in(&dir) {
            None => return Ok(Binaries { dir }),
            Some(missing) => looked_in.push(format!("KUBEBUILDER_ASSETS={} ({missing})", dir.display())),
        }
    }
    match cache {
        Some(dir) => match missing_in(&dir).or_else(|| stale_stamp(&dir)) {
            None => return Ok(Binaries { dir }),
            Some(problem) => looked_in.push(format!("{} ({problem})", dir.display())),
        },
        None => looked_in.push("the cache folder (neither XDG_CACHE_HOME nor HOME is set)".to_owned()),
    }
    Err(not_found(looked_in))
}

/// Which of the binaries `dir` lacks, or `None` when it holds both as files.
fn missing_in(dir: &Path) -> Option<String> {
    let missing: Vec<&str> = BINARIES.into_iter().filter(|name| !dir.join(name).is_file()).collect();
    (!missing.is_empty()).then(|| format!("no {}", missing.join(", no ")))
}

/// The stamp `provide.sh` writes into the cache folder next to the binaries.
pub(crate) fn expected_stamp() -> String {
    let v = pinned_versions();
    format!("kubernetes=v{} etcd=v{}", v.kubernetes, v.etcd)
}

/// A note when the cache folder's `VERSIONS` stamp names other versions than `versions.env` (a folder without a
/// stamp is taken as is).
fn stale_stamp(dir: &Path) -> Option<String> {
    let stamp = std::fs::read_to_string(dir.join("VERSIONS")).ok()?;
    let expected = expected_stamp();
    (stamp.trim() != expected).then(|| format!("built for {}, versions.env pins {expected}", stamp.trim()))
}

fn not_found(looked_in: Vec<String>) -> Error {
    let v = pinned_versions();
    Error::BinariesNotFound { looked_in: looked_in.join("; "), kubernetes: v.kubernetes, etcd: v.etcd }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folder_with(names: &[&str]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("temp dir");
        for name in names {
            std::fs::write(dir.path().join(name), "").expect("write");
        }
        dir
    }

    #[test]
    fn kubebuilder_assets_wins_when_it_holds_both() {
        let assets = folder_with(&BINARIES);
        let cache = folder_with(&BINARIES);
        let found = discover_in(Some(assets.path().into()), Some(cache.path().into())).expect("found");
        assert_eq!(found.dir(), assets.path());
        assert_eq!(found.etcd(), assets.path().join("etcd"));
    }

    #[test]
    fn incomplete_kubebuilder_assets_falls_back_to_the_cache() {
        let assets = folder_with(&["etcd"]);
        let cache = folder_with(&BINARIES);
        let found = discover_in(Some(assets.path().into()), Some(cache.path().into())).expect("found");
        assert_eq!(found.dir(), cache.path());
    }

    #[test]
    fn nothing_found_is_one_message_that_says_how_to_provide_them() {
        let assets = folder_with(&["kube-apiserver"]);
        let cache = folder_with(&[]);
        let message =
            discover_in(Some(assets.path().into()), Some(cache.path().into())).expect_err("nothing usable").to_string();
        assert!(message.contains("e2e/control-plane/provide.sh"), "{message}");
        assert!(message.contains("KUBEBUILDER_ASSETS"), "{message}");
        assert!(message.contains(&format!("KUBEBUILDER_ASSETS={} (no etcd)", assets.path().display())), "{message}");
        assert!(message.contains(&format!("{} (no kube-apiserver, no etcd)", cache.path().display())), "{message}");
        assert_eq!(message.lines().count(), 1, "{message}");
    }

    #[test]
    fn cache_built_for_other_versions_is_not_used() {
        let cache = folder_with(&BINARIES);
        std::fs::write(cache.path().join("VERSIONS"), "kubernetes=v1.0.0 etcd=v3.0.0\n").expect("write");
        let message = discover_in(None, Some(cache.path().into())).expect_err("stale").to_string();
        assert!(
            message
                .contains(&format!("built for kubernetes=v1.0.0 etcd=v3.0.0, versions.env pins {}", expected_stamp())),
            "{message}"
        );

        std::fs::write(cache.path().join("VERSIONS"), format!("{}\n", expected_stamp())).expect("write");
        assert_eq!(discover_in(None, Some(cache.path().into())).expect("current").dir(), cache.path());
    }

    #[test]
    fn cache_folder_follows_xdg_then_home() {
        let version = pinned_versions().kubernetes;
        assert_eq!(
            cache_bin_dir(Some("/x".into()), Some("/h".into())),
            Some(PathBuf::from(format!("/x/memgate/k8s-v{version}/bin")))
        );
        assert_eq!(
            cache_bin_dir(Some("".into()), Some("/h".into())),
            Some(PathBuf::from(format!("/h/.cache/memgate/k8s-v{version}/bin")))
        );
        assert_eq!(cache_bin_dir(None, None), None);
    }
}
