//! The one status write per object: a server-side apply of `status` with the operator's field
//! manager. Objects are addressed as dynamic objects, so a spec this version cannot read still
//! gets its status.

use kube::api::{ApiResource, DynamicObject, Patch, PatchParams};
use kube::{Api, Client};
use memgate_crds::{
    API_VERSION, DialectPreset, DialectPresetStatus, MemoryGateway, MemoryGatewayStatus, MemoryProvider,
    MemoryProviderStatus,
};
use serde_json::json;

use crate::render::FIELD_MANAGER;

/// Apply a MemoryProvider's status; returns the object as written.
pub async fn provider(
    client: &Client,
    namespace: &str,
    name: &str,
    status: &MemoryProviderStatus,
) -> Result<DynamicObject, kube::Error> {
    let resource = ApiResource::erase::<MemoryProvider>(&());
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &resource);
    let body = json!({"apiVersion": API_VERSION, "kind": "MemoryProvider", "status": status});
    api.patch_status(name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&body)).await
}

/// Apply a DialectPreset's status; returns the object as written.
pub async fn preset(client: &Client, name: &str, status: &DialectPresetStatus) -> Result<DynamicObject, kube::Error> {
    let resource = ApiResource::erase::<DialectPreset>(&());
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let body = json!({"apiVersion": API_VERSION, "kind": "DialectPreset", "status": status});
    api.patch_status(name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&body)).await
}

/// Apply a MemoryGateway's status; returns the object as written.
pub async fn gateway(
    client: &Client,
    namespace: &str,
    name: &str,
    status: &MemoryGatewayStatus,
) -> Result<DynamicObject, kube::Error> {
    let resource = ApiResource::erase::<MemoryGateway>(&());
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &resource);
    let body = json!({"apiVersion": API_VERSION, "kind": "MemoryGateway", "status": status});
    api.patch_status(name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&body)).await
}
