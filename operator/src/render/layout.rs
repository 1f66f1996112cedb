//! Where things are inside a gateway pod: the one definition of each path and ConfigMap key that
//! the rendered config and the rendered pod must agree on.
//!
//! ```text
//! /etc/memgate/config/gateway.yaml          ConfigMap key gateway.yaml     (serve --config)
//! /etc/memgate/secrets/<secret>/<key>       each referenced Secret, only the referenced keys
//! /etc/memgate/nexent-<i>/gateway.yaml      ConfigMap key nexent-<i>.yaml  (init container i)
//! /var/lib/memgate/plugins-<i>/             PersistentVolumeClaim i        (init container i, writable)
//! ```

/// ConfigMap key of the serving config (and the file name every config folder holds).
pub const CONFIG_KEY: &str = "gateway.yaml";
/// Where the serving config is mounted (`serve --config`).
pub const CONFIG_DIR: &str = "/etc/memgate/config";
/// Folder holding one folder per mounted Secret.
pub const SECRETS_DIR: &str = "/etc/memgate/secrets";
/// [`SECRETS_DIR`] relative to the config folders' parent: what `SecretMount` paths name
/// (`../secrets/<name>`), so one ConfigMap works for every container.
pub const SECRETS_FOLDER: &str = "secrets";

/// ConfigMap key of the config of plugin claim `i`.
pub fn claim_config_key(i: usize) -> String {
    format!("nexent-{i}.yaml")
}

/// Where init container `i` reads its config.
pub fn claim_config_dir(i: usize) -> String {
    format!("/etc/memgate/nexent-{i}")
}

/// Where init container `i` mounts its plugin claim.
pub fn claim_plugins_dir(i: usize) -> String {
    format!("/var/lib/memgate/plugins-{i}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_mount_paths_lead_from_each_config_folder_to_the_secrets() {
        let parent = std::path::Path::new(CONFIG_DIR).parent().expect("a parent");
        assert_eq!(parent.join(SECRETS_FOLDER), std::path::Path::new(SECRETS_DIR));
        let claim_parent = std::path::PathBuf::from(claim_config_dir(3));
        assert_eq!(claim_parent.parent(), Some(parent), "init containers read ../secrets too");
    }
}
