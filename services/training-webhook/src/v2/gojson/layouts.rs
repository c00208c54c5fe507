//! How Go's encoding/json marshals Trainer v2.3.0's TrainJob and TrainingRuntime and every
//! type they reach: generated from the Go types by `go run ./layouts` in
//! tools/upstream-oracle/trainer-v2.3.0 (go1.26.8); do not edit.

#![allow(missing_docs)]

use super::Omit::{Empty, Never, Nil, Null};
use super::{ANY, BOOL, Field, INT, INT_OR_STR, QTY, STR, TIME, Ty};

pub use self::TRAINER_TRAINING_RUNTIME as RUNTIME;
pub use self::TRAINER_TRAIN_JOB as TRAIN_JOB;

/// `k8s.io/api/batch/v1.JobSpec`.
pub static BATCH_JOB_SPEC: Ty = Ty::Struct(&[
    Field { key: "parallelism", ty: &INT, omit: Nil },
    Field { key: "completions", ty: &INT, omit: Nil },
    Field { key: "activeDeadlineSeconds", ty: &INT, omit: Nil },
    Field { key: "podFailurePolicy", ty: &BATCH_POD_FAILURE_POLICY, omit: Nil },
    Field { key: "successPolicy", ty: &BATCH_SUCCESS_POLICY, omit: Nil },
    Field { key: "backoffLimit", ty: &INT, omit: Nil },
    Field { key: "backoffLimitPerIndex", ty: &INT, omit: Nil },
    Field { key: "maxFailedIndexes", ty: &INT, omit: Nil },
    Field { key: "selector", ty: &META_LABEL_SELECTOR, omit: Nil },
    Field { key: "manualSelector", ty: &BOOL, omit: Nil },
    Field { key: "template", ty: &CORE_POD_TEMPLATE_SPEC, omit: Never },
    Field { key: "ttlSecondsAfterFinished", ty: &INT, omit: Nil },
    Field { key: "completionMode", ty: &STR, omit: Nil },
    Field { key: "suspend", ty: &BOOL, omit: Nil },
    Field { key: "podReplacementPolicy", ty: &STR, omit: Nil },
    Field { key: "managedBy", ty: &STR, omit: Nil },
]);
/// `k8s.io/api/batch/v1.JobTemplateSpec`.
pub static BATCH_JOB_TEMPLATE_SPEC: Ty = Ty::Struct(&[
    Field { key: "metadata", ty: &META_OBJECT_META, omit: Never },
    Field { key: "spec", ty: &BATCH_JOB_SPEC, omit: Never },
]);
/// `k8s.io/api/batch/v1.PodFailurePolicy`.
pub static BATCH_POD_FAILURE_POLICY: Ty = Ty::Struct(&[
    Field { key: "rules", ty: &LIST_BATCH_POD_FAILURE_POLICY_RULE, omit: Never },
]);
/// `k8s.io/api/batch/v1.PodFailurePolicyOnExitCodesRequirement`.
pub static BATCH_POD_FAILURE_POLICY_ON_EXIT_CODES_REQUIREMENT: Ty = Ty::Struct(&[
    Field { key: "containerName", ty: &STR, omit: Nil },
    Field { key: "operator", ty: &STR, omit: Never },
    Field { key: "values", ty: &LIST_INT, omit: Never },
]);
/// `k8s.io/api/batch/v1.PodFailurePolicyOnPodConditionsPattern`.
pub static BATCH_POD_FAILURE_POLICY_ON_POD_CONDITIONS_PATTERN: Ty = Ty::Struct(&[
    Field { key: "type", ty: &STR, omit: Never },
    Field { key: "status", ty: &STR, omit: Never },
]);
/// `k8s.io/api/batch/v1.PodFailurePolicyRule`.
pub static BATCH_POD_FAILURE_POLICY_RULE: Ty = Ty::Struct(&[
    Field { key: "action", ty: &STR, omit: Never },
    Field { key: "onExitCodes", ty: &BATCH_POD_FAILURE_POLICY_ON_EXIT_CODES_REQUIREMENT, omit: Nil },
    Field { key: "onPodConditions", ty: &LIST_BATCH_POD_FAILURE_POLICY_ON_POD_CONDITIONS_PATTERN, omit: Empty },
]);
/// `k8s.io/api/batch/v1.SuccessPolicy`.
pub static BATCH_SUCCESS_POLICY: Ty = Ty::Struct(&[
    Field { key: "rules", ty: &LIST_BATCH_SUCCESS_POLICY_RULE, omit: Never },
]);
/// `k8s.io/api/batch/v1.SuccessPolicyRule`.
pub static BATCH_SUCCESS_POLICY_RULE: Ty = Ty::Struct(&[
    Field { key: "succeededIndexes", ty: &STR, omit: Nil },
    Field { key: "succeededCount", ty: &INT, omit: Nil },
]);
/// `k8s.io/api/core/v1.Affinity`.
pub static CORE_AFFINITY: Ty = Ty::Struct(&[
    Field { key: "nodeAffinity", ty: &CORE_NODE_AFFINITY, omit: Nil },
    Field { key: "podAffinity", ty: &CORE_POD_AFFINITY, omit: Nil },
    Field { key: "podAntiAffinity", ty: &CORE_POD_ANTI_AFFINITY, omit: Nil },
]);
/// `k8s.io/api/core/v1.AppArmorProfile`.
pub static CORE_APP_ARMOR_PROFILE: Ty = Ty::Struct(&[
    Field { key: "type", ty: &STR, omit: Never },
    Field { key: "localhostProfile", ty: &STR, omit: Nil },
]);
/// `k8s.io/api/core/v1.AWSElasticBlockStoreVolumeSource`.
pub static CORE_AWS_ELASTIC_BLOCK_STORE_VOLUME_SOURCE: Ty = Ty::Struct(&[
    Field { key: "volumeID", ty: &STR, omit: Never },
    Field { key: "fsType", ty: &STR, omit: Empty },
    Field { key: "partition", ty: &INT, omit: Empty },
    Field { key: "readOnly", ty: &BOOL, omit: Empty },
]);
/// `k8s.io/api/core/v1.AzureDiskVolumeSource`.
pub static CORE_AZURE_DISK_VOLUME_SOURCE: Ty = Ty::Struct(&[
    Field { key: "diskName", ty: &STR, omit: Never },
    Field { key: "diskURI", ty: &STR, omit: Never },
    Field { key: "cachingMode", ty: &STR, omit: Nil },
    Field { key: "fsType", ty: &STR, omit: Nil },
    Field { key: "readOnly", ty: &BOOL, omit: Nil },
    Field { key: "kind", ty: &STR, omit: Nil },
]);
/// `k8s.io/api/core/v1.AzureFileVolumeSource`.
pub static CORE_AZURE_FILE_VOLUME_SOURCE: Ty = Ty::Struct(&[
    Field { key: "secretName", ty: &STR, omit: Never },
    Field { key: "shareName", ty: &STR, omit: Never },
    Field { key: "readOnly", ty: &BOOL, omit: Empty },
]);
/// `k8s.io/api/core/v1.Capabilities`.
pub static CORE_CAPABILITIES: Ty = Ty::Struct(&[
    Field { key: "add", ty: &LIST_STR, omit: Empty },
    Field { key: "drop", ty: &LIST_STR, omit: Empty },
]);
/// `k8s.io/api/core/v1.CephFSVolumeSource`.
pub static CORE_CEPH_FS_VOLUME_SOURCE: Ty = Ty::Struct(&[
    Field { key: "monitors", ty: &LIST_STR, omit: Never },
    Field { key: "path", ty: &STR, omit: Empty },
    Field { key: "user", ty: &STR, omit: Empty },
    Field { key: "secretFile", ty: &STR, omit: Empty },
    Field { key: "secretRef", ty: &CORE_LOCAL_OBJECT_REFERENCE, omit: Nil },
    Field { key: "readOnly", ty: &BOOL, omit: Empty },
]);
/// `k8s.io/api/core/v1.CinderVolumeSource`.
pub static CORE_CINDER_VOLUME_SOURCE: Ty = Ty::Struct(&[
    Field { key: "volumeID", ty: &STR, omit: Never },
    Field { key: "fsType", ty: &STR, omit: Empty },
    Field { key: "readOnly", ty: &BOOL, omit: Empty },
    Field { key: "secretRef", ty: &CORE_LOCAL_OBJECT_REFERENCE, omit: Nil },
]);
/// `k8s.io/api/core/v1.ClusterTrustBundleProjection`.
pub static CORE_CLUSTER_TRUST_BUNDLE_PROJECTION: Ty = Ty::Struct(&[
    Field { key: "name", ty: &STR, omit: Nil },
    Field { key: "signerName", ty: &STR, omit: Nil },
    Field { key: "labelSelector", ty: &META_LABEL_SELECTOR, omit: Nil },
    Field { key: "optional", ty: &BOOL, omit: Nil },
    Field { key: "path", ty: &STR, omit: Never },
]);
/// `k8s.io/api/core/v1.ConfigMapEnvSource`.
pub static CORE_CONFIG_MAP_ENV_SOURCE: Ty = Ty::Struct(&[
    Field { key: "name", ty: &STR, omit: Empty },
    Field { key: "optional", ty: &BOOL, omit: Nil },
]);
/// `k8s.io/api/core/v1.ConfigMapKeySelector`.
pub static CORE_CONFIG_MAP_KEY_SELECTOR: Ty = Ty::Struct(&[
    Field { key: "name", ty: &STR, omit: Empty },
    Field { key: "key", ty: &STR, omit: Never },
    Field { key: "optional", ty: &BOOL, omit: Nil },
]);
/// `k8s.io/api/core/v1.ConfigMapProjection`.
pub static CORE_CONFIG_MAP_PROJECTION: Ty = Ty::Struct(&[
    Field { key: "name", ty: &STR, omit: Empty },
    Field { key: "items", ty: &LIST_CORE_KEY_TO_PATH, omit: Empty },
    Field { key: "optional", ty: &BOOL, omit: Nil },
]);
/// `k8s.io/api/core/v1.ConfigMapVolumeSource`.
pub static CORE_CONFIG_MAP_VOLUME_SOURCE: Ty = Ty::Struct(&[
    Field { key: "name", ty: &STR, omit: Empty },
    Field { key: "items", ty: &LIST_CORE_KEY_TO_PATH, omit: Empty },
    Field { key: "defaultMode", ty: &INT, omit: Nil },
    Field { key: "optional", ty: &BOOL, omit: Nil },
]);
/// `k8s.io/api/core/v1.Container`.
pub static CORE_CONTAINER: Ty = Ty::Struct(&[
    Field { key: "name", ty: &STR, omit: Never },
    Field { key: "image", ty: &STR, omit: Empty },
    Field { key: "command", ty: &LIST_STR, omit: Empty },
    Field { key: "args", ty: &LIST_STR, omit: Empty },
    Field { key: "workingDir", ty: &STR, omit: Empty },
    Field { key: "ports", ty: &LIST_CORE_CONTAINER_PORT, omit: Empty },
    Field { key: "envFrom", ty: &LIST_CORE_ENV_FROM_SOURCE, omit: Empty },
    Field { key: "env", ty: &LIST_CORE_ENV_VAR, omit: Empty },
    Field { key: "resources", ty: &CORE_RESOURCE_REQUIREMENTS, omit: Never },
    Field { key: "resizePolicy", ty: &LIST_CORE_CONTAINER_RESIZE_POLICY, omit: Empty },
    Field { key: "restartPolicy", ty: &STR, omit: Nil },
    Field { key: "restartPolicyRules", ty: &LIST_CORE_CONTAINER_RESTART_RULE, omit: Empty },
    Field { key: "volumeMounts", ty: &LIST_CORE_VOLUME_MOUNT, omit: Empty },
    Field { key: "volumeDevices", ty: &LIST_CORE_VOLUME_DEVICE, omit: Empty },
    Field { key: "livenessProbe", ty: &CORE_PROBE, omit: Nil },
    Field { key: "readinessProbe", ty: &CORE_PROBE, omit: Nil },
    Field { key: "startupProbe", ty: &CORE_PROBE, omit: Nil },
    Field { key: "lifecycle", ty: &CORE_LIFECYCLE, omit: Nil },
    Field { key: "terminationMessagePath", ty: &STR, omit: Empty },
    Field { key: "terminationMessagePolicy", ty: &STR, omit: Empty },
    Field { key: "imagePullPolicy", ty: &STR, omit: Empty },
    Field { key: "securityContext", ty: &CORE_SECURITY_CONTEXT, omit: Nil },
    Field { key: "stdin", ty: &BOOL, omit: Empty },
    Field { key: "stdinOnce", ty: &BOOL, omit: Empty },
    Field { key: "tty", ty: &BOOL, omit: Empty },
]);
/// `k8s.io/api/core/v1.ContainerPort`.
pub static CORE_CONTAINER_PORT: Ty = Ty::Struct(&[
    Field { key: "name", ty: &STR, omit: Empty },
    Field { key: "hostPort", ty: &INT, omit: Empty },
    Field { key: "containerPort", ty: &INT, omit: Never },
    Field { key: "protocol", ty: &STR, omit: Empty },
    Field { key: "hostIP", ty: &STR, omit: Empty },
]);
/// `k8s.io/api/core/v1.ContainerResizePolicy`.
pub static CORE_CONTAINER_RESIZE_POLICY: Ty = Ty::Struct(&[
    Field { key: "resourceName", ty: &STR, omit: Never },
    Field { key: "restartPolicy", ty: &STR, omit: Never },
]);
/// `k8s.io/api/core/v1.ContainerRestartRule`.
pub static CORE_CONTAINER_RESTART_RULE: Ty = Ty::Struct(&[
    Field { key: "action", ty: &STR, omit: Empty },
    Field { key: "exitCodes", ty: &CORE_CONTAINER_RESTART_RULE_ON_EXIT_CODES, omit: Nil },
]);
/// `k8s.io/api/core/v1.ContainerRestartRuleOnExitCodes`.
pub static CORE_CONTAINER_RESTART_RULE_ON_EXIT_CODES: Ty = Ty::Struct(&[
    Field { key: "operator", ty: &STR, omit: Empty },
    Field { key: "values", ty: &LIST_INT, omit: Empty },
]);
/// `k8s.io/api/core/v1.CSIVolumeSource`.
pub static CORE_CSI_VOLUME_SOURCE: Ty = Ty::Struct(&[
    Field { key: "driver", ty: &STR, omit: Never },
    Field { key: "readOnly", ty: &BOOL, omit: Nil },
    Field { key: "fsType", ty: &STR, omit: Nil },
    Field { key: "volumeAttributes", ty: &MAP_STR, omit: Empty },
    Field { key: "nodePublishSecretRef", ty: &CORE_LOCAL_OBJECT_REFERENCE, omit: Nil },
]);
/// `k8s.io/api/core/v1.DownwardAPIProjection`.
pub static CORE_DOWNWARD_API_PROJECTION: Ty = Ty::Struct(&[
    Field { key: "items", ty: &LIST_CORE_DOWNWARD_API_VOLUME_FILE, omit: Empty },
]);
/// `k8s.io/api/core/v1.DownwardAPIVolumeFile`.
pub static CORE_DOWNWARD_API_VOLUME_FILE: Ty = Ty::Struct(&[
    Field { key: "path", ty: &STR, omit: Never },
    Field { key: "fieldRef", ty: &CORE_OBJECT_FIELD_SELECTOR, omit: Nil },
    Field { key: "resourceFieldRef", ty: &CORE_RESOURCE_FIELD_SELECTOR, omit: Nil },
    Field { key: "mode", ty: &INT, omit: Nil },
]);
/// `k8s.io/api/core/v1.DownwardAPIVolumeSource`.
pub static CORE_DOWNWARD_API_VOLUME_SOURCE: Ty = Ty::Struct(&[
    Field { key: "items", ty: &LIST_CORE_DOWNWARD_API_VOLUME_FILE, omit: Empty },
    Field { key: "defaultMode", ty: &INT, omit: Nil },
]);
/// `k8s.io/api/core/v1.EmptyDirVolumeSource`.
pub static CORE_EMPTY_DIR_VOLUME_SOURCE: Ty = Ty::Struct(&[
    Field { key: "medium", ty: &STR, omit: Empty },
    Field { key: "sizeLimit", ty: &QTY, omit: Nil },
]);
/// `k8s.io/api/core/v1.EnvFromSource`.
pub static CORE_ENV_FROM_SOURCE: Ty = Ty::Struct(&[
    Field { key: "prefix", ty: &STR, omit: Empty },
    Field { key: "configMapRef", ty: &CORE_CONFIG_MAP_ENV_SOURCE, omit: Nil },
    Field { key: "secretRef", ty: &CORE_SECRET_ENV_SOURCE, omit: Nil },
]);
/// `k8s.io/api/core/v1.EnvVar`.
pub static CORE_ENV_VAR: Ty = Ty::Struct(&[
    Field { key: "name", ty: &STR, omit: Never },
    Field { key: "value", ty: &STR, omit: Empty },
    Field { key: "valueFrom", ty: &CORE_ENV_VAR_SOURCE, omit: Nil },
]);
/// `k8s.io/api/core/v1.EnvVarSource`.
pub static CORE_ENV_VAR_SOURCE: Ty = Ty::Struct(&[
    Field { key: "fieldRef", ty: &CORE_OBJECT_FIELD_SELECTOR, omit: Nil },
    Field { key: "resourceFieldRef", ty: &CORE_RESOURCE_FIELD_SELECTOR, omit: Nil },
    Field { key: "configMapKeyRef", ty: &CORE_CONFIG_MAP_KEY_SELECTOR, omit: Nil },
    Field { key: "secretKeyRef", ty: &CORE_SECRET_KEY_SELECTOR, omit: Nil },
    Field { key: "fileKeyRef", ty: &CORE_FILE_KEY_SELECTOR, omit: Nil },
]);
/// `k8s.io/api/core/v1.EphemeralContainer`.
pub static CORE_EPHEMERAL_CONTAINER: Ty = Ty::Struct(&[
    Field { key: "name", ty: &STR, omit: Never },
    Field { key: "image", ty: &STR, omit: Empty },
    Field { key: "command", ty: &LIST_STR, omit: Empty },
    Field { key: "args", ty: &LIST_STR, omit: Empty },
    Field { key: "workingDir", ty: &STR, omit: Empty },
    Field { key: "ports", ty: &LIST_CORE_CONTAINER_PORT, omit: Empty },
    Field { key: "envFrom", ty: &LIST_CORE_ENV_FROM_SOURCE, omit: Empty },
    Field { key: "env", ty: &LIST_CORE_ENV_VAR, omit: Empty },
    Field { key: "resources", ty: &CORE_RESOURCE_REQUIREMENTS, omit: Never },
    Field { key: "resizePolicy", ty: &LIST_CORE_CONTAINER_RESIZE_POLICY, omit: Empty },
    Field { key: "restartPolicy", ty: &STR, omit: Nil },
    Field { key: "restartPolicyRules", ty: &LIST_CORE_CONTAINER_RESTART_RULE, omit: Empty },
    Field { key: "volumeMounts", ty: &LIST_CORE_VOLUME_MOUNT, omit: Empty },
    Field { key: "volumeDevices", ty: &LIST_CORE_VOLUME_DEVICE, omit: Empty },
    Field { key: "livenessProbe", ty: &CORE_PROBE, omit: Nil },
    Field { key: "readinessProbe", ty: &CORE_PROBE, omit: Nil },
    Field { key: "startupProbe", ty: &CORE_PROBE, omit: Nil },
    Field { key: "lifecycle", ty: &CORE_LIFECYCLE, omit: Nil },
    Field { key: "terminationMessagePath", ty: &STR, omit: Empty },
    Field { key: "terminationMessagePolicy", ty: &STR, omit: Empty },
    Field { key: "imagePullPolicy", ty: &STR, omit: Empty },
    Field { key: "securityContext", ty: &CORE_SECURITY_CONTEXT, omit: Nil },
    Field { key: "stdin", ty: &BOOL, omit: Empty },
    Field { key: "stdinOnce", ty: &BOOL, omit: Empty },
    Field { key: "tty", ty: &BOOL, omit: Empty },
    Field { key: "targetContainerName", ty: &STR, omit: Empty },
]);
/// `k8s.io/api/core/v1.EphemeralVolumeSource`.
pub static CORE_EPHEMERAL_VOLUME_SOURCE: Ty = Ty::Struct(&[
    Field { key: "volumeClaimTemplate", ty: &CORE_PERSISTENT_VOLUME_CLAIM_TEMPLATE, omit: Nil },
]);
/// `k8s.io/api/core/v1.ExecAction`.
pub static CORE_EXEC_ACTION: Ty = Ty::Struct(&[
    Field { key: "command", ty: &LIST_STR, omit: Empty },
]);
/// `k8s.io/api/core/v1.FCVolumeSource`.
pub static CORE_FC_VOLUME_SOURCE: Ty = Ty::Struct(&[
    Field { key: "targetWWNs", ty: &LIST_STR, omit: Empty },
    Field { key: "lun", ty: &INT, omit: Nil },
    Field { key: "fsType", ty: &STR, omit: Empty },
    Field { key: "readOnly", ty: &BOOL, omit: Empty },
    Field { key: "wwids", ty: &LIST_STR, omit: Empty },
]);
/// `k8s.io/api/core/v1.FileKeySelector`.
pub static CORE_FILE_KEY_SELECTOR: Ty = Ty::Struct(&[
    Field { key: "volumeName", ty: &STR, omit: Never },
    Field { key: "path", ty: &STR, omit: Never },
    Field { key: "key", ty: &STR, omit: Never },
    Field { key: "optional", ty: &BOOL, omit: Nil },
]);
/// `k8s.io/api/core/v1.FlexVolumeSource`.
pub static CORE_FLEX_VOLUME_SOURCE: Ty = Ty::Struct(&[
    Field { key: "driver", ty: &STR, omit: Never },
    Field { key: "fsType", ty: &STR, omit: Empty },
    Field { key: "secretRef", ty: &CORE_LOCAL_OBJECT_REFERENCE, omit: Nil },
    Field { key: "readOnly", ty: &BOOL, omit: Empty },
    Field { key: "options", ty: &MAP_STR, omit: Empty },
]);
/// `k8s.io/api/core/v1.FlockerVolumeSource`.
pub static CORE_FLOCKER_VOLUME_SOURCE: Ty = Ty::Struct(&[
    Field { key: "datasetName", ty: &STR, omit: Empty },
    Field { key: "datasetUUID", ty: &STR, omit: Empty },
]);
/// `k8s.io/api/core/v1.GCEPersistentDiskVolumeSource`.
pub static CORE_GCE_PERSISTENT_DISK_VOLUME_SOURCE: Ty = Ty::Struct(&[
    Field { key: "pdName", ty: &STR, omit: Never },
    Field { key: "fsType", ty: &STR, omit: Empty },
    Field { key: "partition", ty: &INT, omit: Empty },
    Field { key: "readOnly", ty: &BOOL, omit: Empty },
]);
/// `k8s.io/api/core/v1.GitRepoVolumeSource`.
pub static CORE_GIT_REPO_VOLUME_SOURCE: Ty = Ty::Struct(&[
    Field { key: "repository", ty: &STR, omit: Never },
    Field { key: "revision", ty: &STR, omit: Empty },
    Field { key: "directory", ty: &STR, omit: Empty },
]);
/// `k8s.io/api/core/v1.GlusterfsVolumeSource`.
pub static CORE_GLUSTERFS_VOLUME_SOURCE: Ty = Ty::Struct(&[
    Field { key: "endpoints", ty: &STR, omit: Never },
    Field { key: "path", ty: &STR, omit: Never },
    Field { key: "readOnly", ty: &BOOL, omit: Empty },
]);
/// `k8s.io/api/core/v1.GRPCAction`.
pub static CORE_GRPC_ACTION: Ty = Ty::Struct(&[
    Field { key: "port", ty: &INT, omit: Never },
    Field { key: "service", ty: &STR, omit: Null },
]);
/// `k8s.io/api/core/v1.HostAlias`.
pub static CORE_HOST_ALIAS: Ty = Ty::Struct(&[
    Field { key: "ip", ty: &STR, omit: Never },
    Field { key: "hostnames", ty: &LIST_STR, omit: Empty },
]);
/// `k8s.io/api/core/v1.HostPathVolumeSource`.
pub static CORE_HOST_PATH_VOLUME_SOURCE: Ty = Ty::Struct(&[
    Field { key: "path", ty: &STR, omit: Never },
    Field { key: "type", ty: &STR, omit: Nil },
]);
/// `k8s.io/api/core/v1.HTTPGetAction`.
pub static CORE_HTTP_GET_ACTION: Ty = Ty::Struct(&[
    Field { key: "path", ty: &STR, omit: Empty },
    Field { key: "port", ty: &INT_OR_STR, omit: Never },
    Field { key: "host", ty: &STR, omit: Empty },
    Field { key: "scheme", ty: &STR, omit: Empty },
    Field { key: "httpHeaders", ty: &LIST_CORE_HTTP_HEADER, omit: Empty },
]);
/// `k8s.io/api/core/v1.HTTPHeader`.
pub static CORE_HTTP_HEADER: Ty = Ty::Struct(&[
    Field { key: "name", ty: &STR, omit: Never },
    Field { key: "value", ty: &STR, omit: Never },
]);
/// `k8s.io/api/core/v1.ImageVolumeSource`.
pub static CORE_IMAGE_VOLUME_SOURCE: Ty = Ty::Struct(&[
    Field { key: "reference", ty: &STR, omit: Empty },
    Field { key: "pullPolicy", ty: &STR, omit: Empty },
]);
/// `k8s.io/api/core/v1.ISCSIVolumeSource`.
pub static CORE_ISCSI_VOLUME_SOURCE: Ty = Ty::Struct(&[
    Field { key: "targetPortal", ty: &STR, omit: Never },
    Field { key: "iqn", ty: &STR, omit: Never },
    Field { key: "lun", ty: &INT, omit: Never },
    Field { key: "iscsiInterface", ty: &STR, omit: Empty },
    Field { key: "fsType", ty: &STR, omit: Empty },
    Field { key: "readOnly", ty: &BOOL, omit: Empty },
    Field { key: "portals", ty: &LIST_STR, omit: Empty },
    Field { key: "chapAuthDiscovery", ty: &BOOL, omit: Empty },
    Field { key: "chapAuthSession", ty: &BOOL, omit: Empty },
    Field { key: "secretRef", ty: &CORE_LOCAL_OBJECT_REFERENCE, omit: Nil },
    Field { key: "initiatorName", ty: &STR, omit: Nil },
]);
/// `k8s.io/api/core/v1.KeyToPath`.
pub static CORE_KEY_TO_PATH: Ty = Ty::Struct(&[
    Field { key: "key", ty: &STR, omit: Never },
    Field { key: "path", ty: &STR, omit: Never },
    Field { key: "mode", ty: &INT, omit: Nil },
]);
/// `k8s.io/api/core/v1.Lifecycle`.
pub static CORE_LIFECYCLE: Ty = Ty::Struct(&[
    Field { key: "postStart", ty: &CORE_LIFECYCLE_HANDLER, omit: Nil },
    Field { key: "preStop", ty: &CORE_LIFECYCLE_HANDLER, omit: Nil },
    Field { key: "stopSignal", ty: &STR, omit: Nil },
]);
/// `k8s.io/api/core/v1.LifecycleHandler`.
pub static CORE_LIFECYCLE_HANDLER: Ty = Ty::Struct(&[
    Field { key: "exec", ty: &CORE_EXEC_ACTION, omit: Nil },
    Field { key: "httpGet", ty: &CORE_HTTP_GET_ACTION, omit: Nil },
    Field { key: "tcpSocket", ty: &CORE_TCP_SOCKET_ACTION, omit: Nil },
    Field { key: "sleep", ty: &CORE_SLEEP_ACTION, omit: Nil },
]);
/// `k8s.io/api/core/v1.LocalObjectReference`.
pub static CORE_LOCAL_OBJECT_REFERENCE: Ty = Ty::Struct(&[
    Field { key: "name", ty: &STR, omit: Empty },
]);
/// `k8s.io/api/core/v1.ModifyVolumeStatus`.
pub static CORE_MODIFY_VOLUME_STATUS: Ty = Ty::Struct(&[
    Field { key: "targetVolumeAttributesClassName", ty: &STR, omit: Empty },
    Field { key: "status", ty: &STR, omit: Never },
]);
/// `k8s.io/api/core/v1.NFSVolumeSource`.
pub static CORE_NFS_VOLUME_SOURCE: Ty = Ty::Struct(&[
    Field { key: "server", ty: &STR, omit: Never },
    Field { key: "path", ty: &STR, omit: Never },
    Field { key: "readOnly", ty: &BOOL, omit: Empty },
]);
/// `k8s.io/api/core/v1.NodeAffinity`.
pub static CORE_NODE_AFFINITY: Ty = Ty::Struct(&[
    Field { key: "requiredDuringSchedulingIgnoredDuringExecution", ty: &CORE_NODE_SELECTOR, omit: Nil },
    Field { key: "preferredDuringSchedulingIgnoredDuringExecution", ty: &LIST_CORE_PREFERRED_SCHEDULING_TERM, omit: Empty },
]);
/// `k8s.io/api/core/v1.NodeSelector`.
pub static CORE_NODE_SELECTOR: Ty = Ty::Struct(&[
    Field { key: "nodeSelectorTerms", ty: &LIST_CORE_NODE_SELECTOR_TERM, omit: Never },
]);
/// `k8s.io/api/core/v1.NodeSelectorRequirement`.
pub static CORE_NODE_SELECTOR_REQUIREMENT: Ty = Ty::Struct(&[
    Field { key: "key", ty: &STR, omit: Never },
    Field { key: "operator", ty: &STR, omit: Never },
    Field { key: "values", ty: &LIST_STR, omit: Empty },
]);
/// `k8s.io/api/core/v1.NodeSelectorTerm`.
pub static CORE_NODE_SELECTOR_TERM: Ty = Ty::Struct(&[
    Field { key: "matchExpressions", ty: &LIST_CORE_NODE_SELECTOR_REQUIREMENT, omit: Empty },
    Field { key: "matchFields", ty: &LIST_CORE_NODE_SELECTOR_REQUIREMENT, omit: Empty },
]);
/// `k8s.io/api/core/v1.ObjectFieldSelector`.
pub static CORE_OBJECT_FIELD_SELECTOR: Ty = Ty::Struct(&[
    Field { key: "apiVersion", ty: &STR, omit: Empty },
    Field { key: "fieldPath", ty: &STR, omit: Never },
]);
/// `k8s.io/api/core/v1.PersistentVolumeClaim`.
pub static CORE_PERSISTENT_VOLUME_CLAIM: Ty = Ty::Struct(&[
    Field { key: "kind", ty: &STR, omit: Empty },
    Field { key: "apiVersion", ty: &STR, omit: Empty },
    Field { key: "metadata", ty: &META_OBJECT_META, omit: Never },
    Field { key: "spec", ty: &CORE_PERSISTENT_VOLUME_CLAIM_SPEC, omit: Never },
    Field { key: "status", ty: &CORE_PERSISTENT_VOLUME_CLAIM_STATUS, omit: Never },
]);
/// `k8s.io/api/core/v1.PersistentVolumeClaimCondition`.
pub static CORE_PERSISTENT_VOLUME_CLAIM_CONDITION: Ty = Ty::Struct(&[
    Field { key: "type", ty: &STR, omit: Never },
    Field { key: "status", ty: &STR, omit: Never },
    Field { key: "lastProbeTime", ty: &TIME, omit: Never },
    Field { key: "lastTransitionTime", ty: &TIME, omit: Never },
    Field { key: "reason", ty: &STR, omit: Empty },
    Field { key: "message", ty: &STR, omit: Empty },
]);
/// `k8s.io/api/core/v1.PersistentVolumeClaimSpec`.
pub static CORE_PERSISTENT_VOLUME_CLAIM_SPEC: Ty = Ty::Struct(&[
    Field { key: "accessModes", ty: &LIST_STR, omit: Empty },
    Field { key: "selector", ty: &META_LABEL_SELECTOR, omit: Nil },
    Field { key: "resources", ty: &CORE_VOLUME_RESOURCE_REQUIREMENTS, omit: Never },
    Field { key: "volumeName", ty: &STR, omit: Empty },
    Field { key: "storageClassName", ty: &STR, omit: Nil },
    Field { key: "volumeMode", ty: &STR, omit: Nil },
    Field { key: "dataSource", ty: &CORE_TYPED_LOCAL_OBJECT_REFERENCE, omit: Nil },
    Field { key: "dataSourceRef", ty: &CORE_TYPED_OBJECT_REFERENCE, omit: Nil },
    Field { key: "volumeAttributesClassName", ty: &STR, omit: Nil },
]);
/// `k8s.io/api/core/v1.PersistentVolumeClaimStatus`.
pub static CORE_PERSISTENT_VOLUME_CLAIM_STATUS: Ty = Ty::Struct(&[
    Field { key: "phase", ty: &STR, omit: Empty },
    Field { key: "accessModes", ty: &LIST_STR, omit: Empty },
    Field { key: "capacity", ty: &MAP_QTY, omit: Empty },
    Field { key: "conditions", ty: &LIST_CORE_PERSISTENT_VOLUME_CLAIM_CONDITION, omit: Empty },
    Field { key: "allocatedResources", ty: &MAP_QTY, omit: Empty },
    Field { key: "allocatedResourceStatuses", ty: &MAP_STR, omit: Empty },
    Field { key: "currentVolumeAttributesClassName", ty: &STR, omit: Nil },
    Field { key: "modifyVolumeStatus", ty: &CORE_MODIFY_VOLUME_STATUS, omit: Nil },
]);
/// `k8s.io/api/core/v1.PersistentVolumeClaimTemplate`.
pub static CORE_PERSISTENT_VOLUME_CLAIM_TEMPLATE: Ty = Ty::Struct(&[
    Field { key: "metadata", ty: &META_OBJECT_META, omit: Never },
    Field { key: "spec", ty: &CORE_PERSISTENT_VOLUME_CLAIM_SPEC, omit: Never },
]);
/// `k8s.io/api/core/v1.PersistentVolumeClaimVolumeSource`.
pub static CORE_PERSISTENT_VOLUME_CLAIM_VOLUME_SOURCE: Ty = Ty::Struct(&[
    Field { key: "claimName", ty: &STR, omit: Never },
    Field { key: "readOnly", ty: &BOOL, omit: Empty },
]);
/// `k8s.io/api/core/v1.PhotonPersistentDiskVolumeSource`.
pub static CORE_PHOTON_PERSISTENT_DISK_VOLUME_SOURCE: Ty = Ty::Struct(&[
    Field { key: "pdID", ty: &STR, omit: Never },
    Field { key: "fsType", ty: &STR, omit: Empty },
]);
/// `k8s.io/api/core/v1.PodAffinity`.
pub static CORE_POD_AFFINITY: Ty = Ty::Struct(&[
    Field { key: "requiredDuringSchedulingIgnoredDuringExecution", ty: &LIST_CORE_POD_AFFINITY_TERM, omit: Empty },
    Field { key: "preferredDuringSchedulingIgnoredDuringExecution", ty: &LIST_CORE_WEIGHTED_POD_AFFINITY_TERM, omit: Empty },
]);
/// `k8s.io/api/core/v1.PodAffinityTerm`.
pub static CORE_POD_AFFINITY_TERM: Ty = Ty::Struct(&[
    Field { key: "labelSelector", ty: &META_LABEL_SELECTOR, omit: Nil },
    Field { key: "namespaces", ty: &LIST_STR, omit: Empty },
    Field { key: "topologyKey", ty: &STR, omit: Never },
    Field { key: "namespaceSelector", ty: &META_LABEL_SELECTOR, omit: Nil },
    Field { key: "matchLabelKeys", ty: &LIST_STR, omit: Empty },
    Field { key: "mismatchLabelKeys", ty: &LIST_STR, omit: Empty },
]);
/// `k8s.io/api/core/v1.PodAntiAffinity`.
pub static CORE_POD_ANTI_AFFINITY: Ty = Ty::Struct(&[
    Field { key: "requiredDuringSchedulingIgnoredDuringExecution", ty: &LIST_CORE_POD_AFFINITY_TERM, omit: Empty },
    Field { key: "preferredDuringSchedulingIgnoredDuringExecution", ty: &LIST_CORE_WEIGHTED_POD_AFFINITY_TERM, omit: Empty },
]);
/// `k8s.io/api/core/v1.PodCertificateProjection`.
pub static CORE_POD_CERTIFICATE_PROJECTION: Ty = Ty::Struct(&[
    Field { key: "signerName", ty: &STR, omit: Empty },
    Field { key: "keyType", ty: &STR, omit: Empty },
    Field { key: "maxExpirationSeconds", ty: &INT, omit: Nil },
    Field { key: "credentialBundlePath", ty: &STR, omit: Empty },
    Field { key: "keyPath", ty: &STR, omit: Empty },
    Field { key: "certificateChainPath", ty: &STR, omit: Empty },
    Field { key: "userAnnotations", ty: &MAP_STR, omit: Empty },
]);
/// `k8s.io/api/core/v1.PodDNSConfig`.
pub static CORE_POD_DNS_CONFIG: Ty = Ty::Struct(&[
    Field { key: "nameservers", ty: &LIST_STR, omit: Empty },
    Field { key: "searches", ty: &LIST_STR, omit: Empty },
    Field { key: "options", ty: &LIST_CORE_POD_DNS_CONFIG_OPTION, omit: Empty },
]);
/// `k8s.io/api/core/v1.PodDNSConfigOption`.
pub static CORE_POD_DNS_CONFIG_OPTION: Ty = Ty::Struct(&[
    Field { key: "name", ty: &STR, omit: Empty },
    Field { key: "value", ty: &STR, omit: Nil },
]);
/// `k8s.io/api/core/v1.PodOS`.
pub static CORE_POD_OS: Ty = Ty::Struct(&[
    Field { key: "name", ty: &STR, omit: Never },
]);
/// `k8s.io/api/core/v1.PodReadinessGate`.
pub static CORE_POD_READINESS_GATE: Ty = Ty::Struct(&[
    Field { key: "conditionType", ty: &STR, omit: Never },
]);
/// `k8s.io/api/core/v1.PodResourceClaim`.
pub static CORE_POD_RESOURCE_CLAIM: Ty = Ty::Struct(&[
    Field { key: "name", ty: &STR, omit: Never },
    Field { key: "resourceClaimName", ty: &STR, omit: Nil },
    Field { key: "resourceClaimTemplateName", ty: &STR, omit: Nil },
]);
/// `k8s.io/api/core/v1.PodSchedulingGate`.
pub static CORE_POD_SCHEDULING_GATE: Ty = Ty::Struct(&[
    Field { key: "name", ty: &STR, omit: Never },
]);
/// `k8s.io/api/core/v1.PodSchedulingGroup`.
pub static CORE_POD_SCHEDULING_GROUP: Ty = Ty::Struct(&[
    Field { key: "podGroupName", ty: &STR, omit: Nil },
]);
/// `k8s.io/api/core/v1.PodSecurityContext`.
pub static CORE_POD_SECURITY_CONTEXT: Ty = Ty::Struct(&[
    Field { key: "seLinuxOptions", ty: &CORE_SE_LINUX_OPTIONS, omit: Nil },
    Field { key: "windowsOptions", ty: &CORE_WINDOWS_SECURITY_CONTEXT_OPTIONS, omit: Nil },
    Field { key: "runAsUser", ty: &INT, omit: Nil },
    Field { key: "runAsGroup", ty: &INT, omit: Nil },
    Field { key: "runAsNonRoot", ty: &BOOL, omit: Nil },
    Field { key: "supplementalGroups", ty: &LIST_INT, omit: Empty },
    Field { key: "supplementalGroupsPolicy", ty: &STR, omit: Nil },
    Field { key: "fsGroup", ty: &INT, omit: Nil },
    Field { key: "sysctls", ty: &LIST_CORE_SYSCTL, omit: Empty },
    Field { key: "fsGroupChangePolicy", ty: &STR, omit: Nil },
    Field { key: "seccompProfile", ty: &CORE_SECCOMP_PROFILE, omit: Nil },
    Field { key: "appArmorProfile", ty: &CORE_APP_ARMOR_PROFILE, omit: Nil },
    Field { key: "seLinuxChangePolicy", ty: &STR, omit: Nil },
]);
/// `k8s.io/api/core/v1.PodSpec`.
pub static CORE_POD_SPEC: Ty = Ty::Struct(&[
    Field { key: "volumes", ty: &LIST_CORE_VOLUME, omit: Empty },
    Field { key: "initContainers", ty: &LIST_CORE_CONTAINER, omit: Empty },
    Field { key: "containers", ty: &LIST_CORE_CONTAINER, omit: Never },
    Field { key: "ephemeralContainers", ty: &LIST_CORE_EPHEMERAL_CONTAINER, omit: Empty },
    Field { key: "restartPolicy", ty: &STR, omit: Empty },
    Field { key: "terminationGracePeriodSeconds", ty: &INT, omit: Nil },
    Field { key: "activeDeadlineSeconds", ty: &INT, omit: Nil },
    Field { key: "dnsPolicy", ty: &STR, omit: Empty },
    Field { key: "nodeSelector", ty: &MAP_STR, omit: Empty },
    Field { key: "serviceAccountName", ty: &STR, omit: Empty },
    Field { key: "serviceAccount", ty: &STR, omit: Empty },
    Field { key: "automountServiceAccountToken", ty: &BOOL, omit: Nil },
    Field { key: "nodeName", ty: &STR, omit: Empty },
    Field { key: "hostNetwork", ty: &BOOL, omit: Empty },
    Field { key: "hostPID", ty: &BOOL, omit: Empty },
    Field { key: "hostIPC", ty: &BOOL, omit: Empty },
    Field { key: "shareProcessNamespace", ty: &BOOL, omit: Nil },
    Field { key: "securityContext", ty: &CORE_POD_SECURITY_CONTEXT, omit: Nil },
    Field { key: "imagePullSecrets", ty: &LIST_CORE_LOCAL_OBJECT_REFERENCE, omit: Empty },
    Field { key: "hostname", ty: &STR, omit: Empty },
    Field { key: "subdomain", ty: &STR, omit: Empty },
    Field { key: "affinity", ty: &CORE_AFFINITY, omit: Nil },
    Field { key: "schedulerName", ty: &STR, omit: Empty },
    Field { key: "tolerations", ty: &LIST_CORE_TOLERATION, omit: Empty },
    Field { key: "hostAliases", ty: &LIST_CORE_HOST_ALIAS, omit: Empty },
    Field { key: "priorityClassName", ty: &STR, omit: Empty },
    Field { key: "priority", ty: &INT, omit: Nil },
    Field { key: "dnsConfig", ty: &CORE_POD_DNS_CONFIG, omit: Nil },
    Field { key: "readinessGates", ty: &LIST_CORE_POD_READINESS_GATE, omit: Empty },
    Field { key: "runtimeClassName", ty: &STR, omit: Nil },
    Field { key: "enableServiceLinks", ty: &BOOL, omit: Nil },
    Field { key: "preemptionPolicy", ty: &STR, omit: Nil },
    Field { key: "overhead", ty: &MAP_QTY, omit: Empty },
    Field { key: "topologySpreadConstraints", ty: &LIST_CORE_TOPOLOGY_SPREAD_CONSTRAINT, omit: Empty },
    Field { key: "setHostnameAsFQDN", ty: &BOOL, omit: Nil },
    Field { key: "os", ty: &CORE_POD_OS, omit: Nil },
    Field { key: "hostUsers", ty: &BOOL, omit: Nil },
    Field { key: "schedulingGates", ty: &LIST_CORE_POD_SCHEDULING_GATE, omit: Empty },
    Field { key: "resourceClaims", ty: &LIST_CORE_POD_RESOURCE_CLAIM, omit: Empty },
    Field { key: "resources", ty: &CORE_RESOURCE_REQUIREMENTS, omit: Nil },
    Field { key: "hostnameOverride", ty: &STR, omit: Nil },
    Field { key: "schedulingGroup", ty: &CORE_POD_SCHEDULING_GROUP, omit: Nil },
]);
/// `k8s.io/api/core/v1.PodTemplateSpec`.
pub static CORE_POD_TEMPLATE_SPEC: Ty = Ty::Struct(&[
    Field { key: "metadata", ty: &META_OBJECT_META, omit: Never },
    Field { key: "spec", ty: &CORE_POD_SPEC, omit: Never },
]);
/// `k8s.io/api/core/v1.PortworxVolumeSource`.
pub static CORE_PORTWORX_VOLUME_SOURCE: Ty = Ty::Struct(&[
    Field { key: "volumeID", ty: &STR, omit: Never },
    Field { key: "fsType", ty: &STR, omit: Empty },
    Field { key: "readOnly", ty: &BOOL, omit: Empty },
]);
/// `k8s.io/api/core/v1.PreferredSchedulingTerm`.
pub static CORE_PREFERRED_SCHEDULING_TERM: Ty = Ty::Struct(&[
    Field { key: "weight", ty: &INT, omit: Never },
    Field { key: "preference", ty: &CORE_NODE_SELECTOR_TERM, omit: Never },
]);
/// `k8s.io/api/core/v1.Probe`.
pub static CORE_PROBE: Ty = Ty::Struct(&[
    Field { key: "exec", ty: &CORE_EXEC_ACTION, omit: Nil },
    Field { key: "httpGet", ty: &CORE_HTTP_GET_ACTION, omit: Nil },
    Field { key: "tcpSocket", ty: &CORE_TCP_SOCKET_ACTION, omit: Nil },
    Field { key: "grpc", ty: &CORE_GRPC_ACTION, omit: Nil },
    Field { key: "initialDelaySeconds", ty: &INT, omit: Empty },
    Field { key: "timeoutSeconds", ty: &INT, omit: Empty },
    Field { key: "periodSeconds", ty: &INT, omit: Empty },
    Field { key: "successThreshold", ty: &INT, omit: Empty },
    Field { key: "failureThreshold", ty: &INT, omit: Empty },
    Field { key: "terminationGracePeriodSeconds", ty: &INT, omit: Nil },
]);
/// `k8s.io/api/core/v1.ProjectedVolumeSource`.
pub static CORE_PROJECTED_VOLUME_SOURCE: Ty = Ty::Struct(&[
    Field { key: "sources", ty: &LIST_CORE_VOLUME_PROJECTION, omit: Never },
    Field { key: "defaultMode", ty: &INT, omit: Nil },
]);
/// `k8s.io/api/core/v1.QuobyteVolumeSource`.
pub static CORE_QUOBYTE_VOLUME_SOURCE: Ty = Ty::Struct(&[
    Field { key: "registry", ty: &STR, omit: Never },
    Field { key: "volume", ty: &STR, omit: Never },
    Field { key: "readOnly", ty: &BOOL, omit: Empty },
    Field { key: "user", ty: &STR, omit: Empty },
    Field { key: "group", ty: &STR, omit: Empty },
    Field { key: "tenant", ty: &STR, omit: Empty },
]);
/// `k8s.io/api/core/v1.RBDVolumeSource`.
pub static CORE_RBD_VOLUME_SOURCE: Ty = Ty::Struct(&[
    Field { key: "monitors", ty: &LIST_STR, omit: Never },
    Field { key: "image", ty: &STR, omit: Never },
    Field { key: "fsType", ty: &STR, omit: Empty },
    Field { key: "pool", ty: &STR, omit: Empty },
    Field { key: "user", ty: &STR, omit: Empty },
    Field { key: "keyring", ty: &STR, omit: Empty },
    Field { key: "secretRef", ty: &CORE_LOCAL_OBJECT_REFERENCE, omit: Nil },
    Field { key: "readOnly", ty: &BOOL, omit: Empty },
]);
/// `k8s.io/api/core/v1.ResourceClaim`.
pub static CORE_RESOURCE_CLAIM: Ty = Ty::Struct(&[
    Field { key: "name", ty: &STR, omit: Never },
    Field { key: "request", ty: &STR, omit: Empty },
]);
/// `k8s.io/api/core/v1.ResourceFieldSelector`.
pub static CORE_RESOURCE_FIELD_SELECTOR: Ty = Ty::Struct(&[
    Field { key: "containerName", ty: &STR, omit: Empty },
    Field { key: "resource", ty: &STR, omit: Never },
    Field { key: "divisor", ty: &QTY, omit: Never },
]);
/// `k8s.io/api/core/v1.ResourceRequirements`.
pub static CORE_RESOURCE_REQUIREMENTS: Ty = Ty::Struct(&[
    Field { key: "limits", ty: &MAP_QTY, omit: Empty },
    Field { key: "requests", ty: &MAP_QTY, omit: Empty },
    Field { key: "claims", ty: &LIST_CORE_RESOURCE_CLAIM, omit: Empty },
]);
/// `k8s.io/api/core/v1.ScaleIOVolumeSource`.
pub static CORE_SCALE_IO_VOLUME_SOURCE: Ty = Ty::Struct(&[
    Field { key: "gateway", ty: &STR, omit: Never },
    Field { key: "system", ty: &STR, omit: Never },
    Field { key: "secretRef", ty: &CORE_LOCAL_OBJECT_REFERENCE, omit: Null },
    Field { key: "sslEnabled", ty: &BOOL, omit: Empty },
    Field { key: "protectionDomain", ty: &STR, omit: Empty },
    Field { key: "storagePool", ty: &STR, omit: Empty },
    Field { key: "storageMode", ty: &STR, omit: Empty },
    Field { key: "volumeName", ty: &STR, omit: Empty },
    Field { key: "fsType", ty: &STR, omit: Empty },
    Field { key: "readOnly", ty: &BOOL, omit: Empty },
]);
/// `k8s.io/api/core/v1.SeccompProfile`.
pub static CORE_SECCOMP_PROFILE: Ty = Ty::Struct(&[
    Field { key: "type", ty: &STR, omit: Never },
    Field { key: "localhostProfile", ty: &STR, omit: Nil },
]);
/// `k8s.io/api/core/v1.SecretEnvSource`.
pub static CORE_SECRET_ENV_SOURCE: Ty = Ty::Struct(&[
    Field { key: "name", ty: &STR, omit: Empty },
    Field { key: "optional", ty: &BOOL, omit: Nil },
]);
/// `k8s.io/api/core/v1.SecretKeySelector`.
pub static CORE_SECRET_KEY_SELECTOR: Ty = Ty::Struct(&[
    Field { key: "name", ty: &STR, omit: Empty },
    Field { key: "key", ty: &STR, omit: Never },
    Field { key: "optional", ty: &BOOL, omit: Nil },
]);
/// `k8s.io/api/core/v1.SecretProjection`.
pub static CORE_SECRET_PROJECTION: Ty = Ty::Struct(&[
    Field { key: "name", ty: &STR, omit: Empty },
    Field { key: "items", ty: &LIST_CORE_KEY_TO_PATH, omit: Empty },
    Field { key: "optional", ty: &BOOL, omit: Nil },
]);
/// `k8s.io/api/core/v1.SecretVolumeSource`.
pub static CORE_SECRET_VOLUME_SOURCE: Ty = Ty::Struct(&[
    Field { key: "secretName", ty: &STR, omit: Empty },
    Field { key: "items", ty: &LIST_CORE_KEY_TO_PATH, omit: Empty },
    Field { key: "defaultMode", ty: &INT, omit: Nil },
    Field { key: "optional", ty: &BOOL, omit: Nil },
]);
/// `k8s.io/api/core/v1.SecurityContext`.
pub static CORE_SECURITY_CONTEXT: Ty = Ty::Struct(&[
    Field { key: "capabilities", ty: &CORE_CAPABILITIES, omit: Nil },
    Field { key: "privileged", ty: &BOOL, omit: Nil },
    Field { key: "seLinuxOptions", ty: &CORE_SE_LINUX_OPTIONS, omit: Nil },
    Field { key: "windowsOptions", ty: &CORE_WINDOWS_SECURITY_CONTEXT_OPTIONS, omit: Nil },
    Field { key: "runAsUser", ty: &INT, omit: Nil },
    Field { key: "runAsGroup", ty: &INT, omit: Nil },
    Field { key: "runAsNonRoot", ty: &BOOL, omit: Nil },
    Field { key: "readOnlyRootFilesystem", ty: &BOOL, omit: Nil },
    Field { key: "allowPrivilegeEscalation", ty: &BOOL, omit: Nil },
    Field { key: "procMount", ty: &STR, omit: Nil },
    Field { key: "seccompProfile", ty: &CORE_SECCOMP_PROFILE, omit: Nil },
    Field { key: "appArmorProfile", ty: &CORE_APP_ARMOR_PROFILE, omit: Nil },
]);
/// `k8s.io/api/core/v1.ServiceAccountTokenProjection`.
pub static CORE_SERVICE_ACCOUNT_TOKEN_PROJECTION: Ty = Ty::Struct(&[
    Field { key: "audience", ty: &STR, omit: Empty },
    Field { key: "expirationSeconds", ty: &INT, omit: Nil },
    Field { key: "path", ty: &STR, omit: Never },
]);
/// `k8s.io/api/core/v1.SELinuxOptions`.
pub static CORE_SE_LINUX_OPTIONS: Ty = Ty::Struct(&[
    Field { key: "user", ty: &STR, omit: Empty },
    Field { key: "role", ty: &STR, omit: Empty },
    Field { key: "type", ty: &STR, omit: Empty },
    Field { key: "level", ty: &STR, omit: Empty },
]);
/// `k8s.io/api/core/v1.SleepAction`.
pub static CORE_SLEEP_ACTION: Ty = Ty::Struct(&[
    Field { key: "seconds", ty: &INT, omit: Never },
]);
/// `k8s.io/api/core/v1.StorageOSVolumeSource`.
pub static CORE_STORAGE_OS_VOLUME_SOURCE: Ty = Ty::Struct(&[
    Field { key: "volumeName", ty: &STR, omit: Empty },
    Field { key: "volumeNamespace", ty: &STR, omit: Empty },
    Field { key: "fsType", ty: &STR, omit: Empty },
    Field { key: "readOnly", ty: &BOOL, omit: Empty },
    Field { key: "secretRef", ty: &CORE_LOCAL_OBJECT_REFERENCE, omit: Nil },
]);
/// `k8s.io/api/core/v1.Sysctl`.
pub static CORE_SYSCTL: Ty = Ty::Struct(&[
    Field { key: "name", ty: &STR, omit: Never },
    Field { key: "value", ty: &STR, omit: Never },
]);
/// `k8s.io/api/core/v1.TCPSocketAction`.
pub static CORE_TCP_SOCKET_ACTION: Ty = Ty::Struct(&[
    Field { key: "port", ty: &INT_OR_STR, omit: Never },
    Field { key: "host", ty: &STR, omit: Empty },
]);
/// `k8s.io/api/core/v1.Toleration`.
pub static CORE_TOLERATION: Ty = Ty::Struct(&[
    Field { key: "key", ty: &STR, omit: Empty },
    Field { key: "operator", ty: &STR, omit: Empty },
    Field { key: "value", ty: &STR, omit: Empty },
    Field { key: "effect", ty: &STR, omit: Empty },
    Field { key: "tolerationSeconds", ty: &INT, omit: Nil },
]);
/// `k8s.io/api/core/v1.TopologySpreadConstraint`.
pub static CORE_TOPOLOGY_SPREAD_CONSTRAINT: Ty = Ty::Struct(&[
    Field { key: "maxSkew", ty: &INT, omit: Never },
    Field { key: "topologyKey", ty: &STR, omit: Never },
    Field { key: "whenUnsatisfiable", ty: &STR, omit: Never },
    Field { key: "labelSelector", ty: &META_LABEL_SELECTOR, omit: Nil },
    Field { key: "minDomains", ty: &INT, omit: Nil },
    Field { key: "nodeAffinityPolicy", ty: &STR, omit: Nil },
    Field { key: "nodeTaintsPolicy", ty: &STR, omit: Nil },
    Field { key: "matchLabelKeys", ty: &LIST_STR, omit: Empty },
]);
/// `k8s.io/api/core/v1.TypedLocalObjectReference`.
pub static CORE_TYPED_LOCAL_OBJECT_REFERENCE: Ty = Ty::Struct(&[
    Field { key: "apiGroup", ty: &STR, omit: Null },
    Field { key: "kind", ty: &STR, omit: Never },
    Field { key: "name", ty: &STR, omit: Never },
]);
/// `k8s.io/api/core/v1.TypedObjectReference`.
pub static CORE_TYPED_OBJECT_REFERENCE: Ty = Ty::Struct(&[
    Field { key: "apiGroup", ty: &STR, omit: Null },
    Field { key: "kind", ty: &STR, omit: Never },
    Field { key: "name", ty: &STR, omit: Never },
    Field { key: "namespace", ty: &STR, omit: Nil },
]);
/// `k8s.io/api/core/v1.Volume`.
pub static CORE_VOLUME: Ty = Ty::Struct(&[
    Field { key: "name", ty: &STR, omit: Never },
    Field { key: "hostPath", ty: &CORE_HOST_PATH_VOLUME_SOURCE, omit: Nil },
    Field { key: "emptyDir", ty: &CORE_EMPTY_DIR_VOLUME_SOURCE, omit: Nil },
    Field { key: "gcePersistentDisk", ty: &CORE_GCE_PERSISTENT_DISK_VOLUME_SOURCE, omit: Nil },
    Field { key: "awsElasticBlockStore", ty: &CORE_AWS_ELASTIC_BLOCK_STORE_VOLUME_SOURCE, omit: Nil },
    Field { key: "gitRepo", ty: &CORE_GIT_REPO_VOLUME_SOURCE, omit: Nil },
    Field { key: "secret", ty: &CORE_SECRET_VOLUME_SOURCE, omit: Nil },
    Field { key: "nfs", ty: &CORE_NFS_VOLUME_SOURCE, omit: Nil },
    Field { key: "iscsi", ty: &CORE_ISCSI_VOLUME_SOURCE, omit: Nil },
    Field { key: "glusterfs", ty: &CORE_GLUSTERFS_VOLUME_SOURCE, omit: Nil },
    Field { key: "persistentVolumeClaim", ty: &CORE_PERSISTENT_VOLUME_CLAIM_VOLUME_SOURCE, omit: Nil },
    Field { key: "rbd", ty: &CORE_RBD_VOLUME_SOURCE, omit: Nil },
    Field { key: "flexVolume", ty: &CORE_FLEX_VOLUME_SOURCE, omit: Nil },
    Field { key: "cinder", ty: &CORE_CINDER_VOLUME_SOURCE, omit: Nil },
    Field { key: "cephfs", ty: &CORE_CEPH_FS_VOLUME_SOURCE, omit: Nil },
    Field { key: "flocker", ty: &CORE_FLOCKER_VOLUME_SOURCE, omit: Nil },
    Field { key: "downwardAPI", ty: &CORE_DOWNWARD_API_VOLUME_SOURCE, omit: Nil },
    Field { key: "fc", ty: &CORE_FC_VOLUME_SOURCE, omit: Nil },
    Field { key: "azureFile", ty: &CORE_AZURE_FILE_VOLUME_SOURCE, omit: Nil },
    Field { key: "configMap", ty: &CORE_CONFIG_MAP_VOLUME_SOURCE, omit: Nil },
    Field { key: "vsphereVolume", ty: &CORE_VSPHERE_VIRTUAL_DISK_VOLUME_SOURCE, omit: Nil },
    Field { key: "quobyte", ty: &CORE_QUOBYTE_VOLUME_SOURCE, omit: Nil },
    Field { key: "azureDisk", ty: &CORE_AZURE_DISK_VOLUME_SOURCE, omit: Nil },
    Field { key: "photonPersistentDisk", ty: &CORE_PHOTON_PERSISTENT_DISK_VOLUME_SOURCE, omit: Nil },
    Field { key: "projected", ty: &CORE_PROJECTED_VOLUME_SOURCE, omit: Nil },
    Field { key: "portworxVolume", ty: &CORE_PORTWORX_VOLUME_SOURCE, omit: Nil },
    Field { key: "scaleIO", ty: &CORE_SCALE_IO_VOLUME_SOURCE, omit: Nil },
    Field { key: "storageos", ty: &CORE_STORAGE_OS_VOLUME_SOURCE, omit: Nil },
    Field { key: "csi", ty: &CORE_CSI_VOLUME_SOURCE, omit: Nil },
    Field { key: "ephemeral", ty: &CORE_EPHEMERAL_VOLUME_SOURCE, omit: Nil },
    Field { key: "image", ty: &CORE_IMAGE_VOLUME_SOURCE, omit: Nil },
]);
/// `k8s.io/api/core/v1.VolumeDevice`.
pub static CORE_VOLUME_DEVICE: Ty = Ty::Struct(&[
    Field { key: "name", ty: &STR, omit: Never },
    Field { key: "devicePath", ty: &STR, omit: Never },
]);
/// `k8s.io/api/core/v1.VolumeMount`.
pub static CORE_VOLUME_MOUNT: Ty = Ty::Struct(&[
    Field { key: "name", ty: &STR, omit: Never },
    Field { key: "readOnly", ty: &BOOL, omit: Empty },
    Field { key: "recursiveReadOnly", ty: &STR, omit: Nil },
    Field { key: "mountPath", ty: &STR, omit: Never },
    Field { key: "subPath", ty: &STR, omit: Empty },
    Field { key: "mountPropagation", ty: &STR, omit: Nil },
    Field { key: "subPathExpr", ty: &STR, omit: Empty },
]);
/// `k8s.io/api/core/v1.VolumeProjection`.
pub static CORE_VOLUME_PROJECTION: Ty = Ty::Struct(&[
    Field { key: "secret", ty: &CORE_SECRET_PROJECTION, omit: Nil },
    Field { key: "downwardAPI", ty: &CORE_DOWNWARD_API_PROJECTION, omit: Nil },
    Field { key: "configMap", ty: &CORE_CONFIG_MAP_PROJECTION, omit: Nil },
    Field { key: "serviceAccountToken", ty: &CORE_SERVICE_ACCOUNT_TOKEN_PROJECTION, omit: Nil },
    Field { key: "clusterTrustBundle", ty: &CORE_CLUSTER_TRUST_BUNDLE_PROJECTION, omit: Nil },
    Field { key: "podCertificate", ty: &CORE_POD_CERTIFICATE_PROJECTION, omit: Nil },
]);
/// `k8s.io/api/core/v1.VolumeResourceRequirements`.
pub static CORE_VOLUME_RESOURCE_REQUIREMENTS: Ty = Ty::Struct(&[
    Field { key: "limits", ty: &MAP_QTY, omit: Empty },
    Field { key: "requests", ty: &MAP_QTY, omit: Empty },
]);
/// `k8s.io/api/core/v1.VsphereVirtualDiskVolumeSource`.
pub static CORE_VSPHERE_VIRTUAL_DISK_VOLUME_SOURCE: Ty = Ty::Struct(&[
    Field { key: "volumePath", ty: &STR, omit: Never },
    Field { key: "fsType", ty: &STR, omit: Empty },
    Field { key: "storagePolicyName", ty: &STR, omit: Empty },
    Field { key: "storagePolicyID", ty: &STR, omit: Empty },
]);
/// `k8s.io/api/core/v1.WeightedPodAffinityTerm`.
pub static CORE_WEIGHTED_POD_AFFINITY_TERM: Ty = Ty::Struct(&[
    Field { key: "weight", ty: &INT, omit: Never },
    Field { key: "podAffinityTerm", ty: &CORE_POD_AFFINITY_TERM, omit: Never },
]);
/// `k8s.io/api/core/v1.WindowsSecurityContextOptions`.
pub static CORE_WINDOWS_SECURITY_CONTEXT_OPTIONS: Ty = Ty::Struct(&[
    Field { key: "gmsaCredentialSpecName", ty: &STR, omit: Nil },
    Field { key: "gmsaCredentialSpec", ty: &STR, omit: Nil },
    Field { key: "runAsUserName", ty: &STR, omit: Nil },
    Field { key: "hostProcess", ty: &BOOL, omit: Nil },
]);
/// `sigs.k8s.io/jobset/api/jobset/v1alpha2.Coordinator`.
pub static JOBSET_COORDINATOR: Ty = Ty::Struct(&[
    Field { key: "replicatedJob", ty: &STR, omit: Never },
    Field { key: "jobIndex", ty: &INT, omit: Empty },
    Field { key: "podIndex", ty: &INT, omit: Empty },
]);
/// `sigs.k8s.io/jobset/api/jobset/v1alpha2.DependsOn`.
pub static JOBSET_DEPENDS_ON: Ty = Ty::Struct(&[
    Field { key: "name", ty: &STR, omit: Never },
    Field { key: "status", ty: &STR, omit: Never },
]);
/// `sigs.k8s.io/jobset/api/jobset/v1alpha2.FailurePolicy`.
pub static JOBSET_FAILURE_POLICY: Ty = Ty::Struct(&[
    Field { key: "maxRestarts", ty: &INT, omit: Empty },
    Field { key: "restartStrategy", ty: &STR, omit: Empty },
    Field { key: "rules", ty: &LIST_JOBSET_FAILURE_POLICY_RULE, omit: Empty },
]);
/// `sigs.k8s.io/jobset/api/jobset/v1alpha2.FailurePolicyRule`.
pub static JOBSET_FAILURE_POLICY_RULE: Ty = Ty::Struct(&[
    Field { key: "name", ty: &STR, omit: Never },
    Field { key: "action", ty: &STR, omit: Never },
    Field { key: "onJobFailureReasons", ty: &LIST_STR, omit: Empty },
    Field { key: "onJobFailureMessagePatterns", ty: &LIST_STR, omit: Empty },
    Field { key: "targetReplicatedJobs", ty: &LIST_STR, omit: Empty },
]);
/// `sigs.k8s.io/jobset/api/jobset/v1alpha2.JobSetSpec`.
pub static JOBSET_JOB_SET_SPEC: Ty = Ty::Struct(&[
    Field { key: "replicatedJobs", ty: &LIST_JOBSET_REPLICATED_JOB, omit: Empty },
    Field { key: "network", ty: &JOBSET_NETWORK, omit: Nil },
    Field { key: "successPolicy", ty: &JOBSET_SUCCESS_POLICY, omit: Nil },
    Field { key: "failurePolicy", ty: &JOBSET_FAILURE_POLICY, omit: Nil },
    Field { key: "startupPolicy", ty: &JOBSET_STARTUP_POLICY, omit: Nil },
    Field { key: "suspend", ty: &BOOL, omit: Nil },
    Field { key: "coordinator", ty: &JOBSET_COORDINATOR, omit: Nil },
    Field { key: "managedBy", ty: &STR, omit: Nil },
    Field { key: "ttlSecondsAfterFinished", ty: &INT, omit: Nil },
    Field { key: "volumeClaimPolicies", ty: &LIST_JOBSET_VOLUME_CLAIM_POLICY, omit: Empty },
]);
/// `sigs.k8s.io/jobset/api/jobset/v1alpha2.Network`.
pub static JOBSET_NETWORK: Ty = Ty::Struct(&[
    Field { key: "enableDNSHostnames", ty: &BOOL, omit: Nil },
    Field { key: "subdomain", ty: &STR, omit: Empty },
    Field { key: "publishNotReadyAddresses", ty: &BOOL, omit: Nil },
]);
/// `sigs.k8s.io/jobset/api/jobset/v1alpha2.ReplicatedJob`.
pub static JOBSET_REPLICATED_JOB: Ty = Ty::Struct(&[
    Field { key: "name", ty: &STR, omit: Never },
    Field { key: "groupName", ty: &STR, omit: Empty },
    Field { key: "template", ty: &BATCH_JOB_TEMPLATE_SPEC, omit: Never },
    Field { key: "replicas", ty: &INT, omit: Empty },
    Field { key: "dependsOn", ty: &LIST_JOBSET_DEPENDS_ON, omit: Empty },
]);
/// `sigs.k8s.io/jobset/api/jobset/v1alpha2.StartupPolicy`.
pub static JOBSET_STARTUP_POLICY: Ty = Ty::Struct(&[
    Field { key: "startupPolicyOrder", ty: &STR, omit: Never },
]);
/// `sigs.k8s.io/jobset/api/jobset/v1alpha2.SuccessPolicy`.
pub static JOBSET_SUCCESS_POLICY: Ty = Ty::Struct(&[
    Field { key: "operator", ty: &STR, omit: Never },
    Field { key: "targetReplicatedJobs", ty: &LIST_STR, omit: Empty },
]);
/// `sigs.k8s.io/jobset/api/jobset/v1alpha2.VolumeClaimPolicy`.
pub static JOBSET_VOLUME_CLAIM_POLICY: Ty = Ty::Struct(&[
    Field { key: "templates", ty: &LIST_CORE_PERSISTENT_VOLUME_CLAIM, omit: Empty },
    Field { key: "retentionPolicy", ty: &JOBSET_VOLUME_RETENTION_POLICY, omit: Nil },
]);
/// `sigs.k8s.io/jobset/api/jobset/v1alpha2.VolumeRetentionPolicy`.
pub static JOBSET_VOLUME_RETENTION_POLICY: Ty = Ty::Struct(&[
    Field { key: "whenDeleted", ty: &STR, omit: Nil },
]);
pub static LIST_BATCH_POD_FAILURE_POLICY_ON_POD_CONDITIONS_PATTERN: Ty = Ty::List(&BATCH_POD_FAILURE_POLICY_ON_POD_CONDITIONS_PATTERN);
pub static LIST_BATCH_POD_FAILURE_POLICY_RULE: Ty = Ty::List(&BATCH_POD_FAILURE_POLICY_RULE);
pub static LIST_BATCH_SUCCESS_POLICY_RULE: Ty = Ty::List(&BATCH_SUCCESS_POLICY_RULE);
pub static LIST_CORE_CONTAINER: Ty = Ty::List(&CORE_CONTAINER);
pub static LIST_CORE_CONTAINER_PORT: Ty = Ty::List(&CORE_CONTAINER_PORT);
pub static LIST_CORE_CONTAINER_RESIZE_POLICY: Ty = Ty::List(&CORE_CONTAINER_RESIZE_POLICY);
pub static LIST_CORE_CONTAINER_RESTART_RULE: Ty = Ty::List(&CORE_CONTAINER_RESTART_RULE);
pub static LIST_CORE_DOWNWARD_API_VOLUME_FILE: Ty = Ty::List(&CORE_DOWNWARD_API_VOLUME_FILE);
pub static LIST_CORE_ENV_FROM_SOURCE: Ty = Ty::List(&CORE_ENV_FROM_SOURCE);
pub static LIST_CORE_ENV_VAR: Ty = Ty::List(&CORE_ENV_VAR);
pub static LIST_CORE_EPHEMERAL_CONTAINER: Ty = Ty::List(&CORE_EPHEMERAL_CONTAINER);
pub static LIST_CORE_HOST_ALIAS: Ty = Ty::List(&CORE_HOST_ALIAS);
pub static LIST_CORE_HTTP_HEADER: Ty = Ty::List(&CORE_HTTP_HEADER);
pub static LIST_CORE_KEY_TO_PATH: Ty = Ty::List(&CORE_KEY_TO_PATH);
pub static LIST_CORE_LOCAL_OBJECT_REFERENCE: Ty = Ty::List(&CORE_LOCAL_OBJECT_REFERENCE);
pub static LIST_CORE_NODE_SELECTOR_REQUIREMENT: Ty = Ty::List(&CORE_NODE_SELECTOR_REQUIREMENT);
pub static LIST_CORE_NODE_SELECTOR_TERM: Ty = Ty::List(&CORE_NODE_SELECTOR_TERM);
pub static LIST_CORE_PERSISTENT_VOLUME_CLAIM: Ty = Ty::List(&CORE_PERSISTENT_VOLUME_CLAIM);
pub static LIST_CORE_PERSISTENT_VOLUME_CLAIM_CONDITION: Ty = Ty::List(&CORE_PERSISTENT_VOLUME_CLAIM_CONDITION);
pub static LIST_CORE_POD_AFFINITY_TERM: Ty = Ty::List(&CORE_POD_AFFINITY_TERM);
pub static LIST_CORE_POD_DNS_CONFIG_OPTION: Ty = Ty::List(&CORE_POD_DNS_CONFIG_OPTION);
pub static LIST_CORE_POD_READINESS_GATE: Ty = Ty::List(&CORE_POD_READINESS_GATE);
pub static LIST_CORE_POD_RESOURCE_CLAIM: Ty = Ty::List(&CORE_POD_RESOURCE_CLAIM);
pub static LIST_CORE_POD_SCHEDULING_GATE: Ty = Ty::List(&CORE_POD_SCHEDULING_GATE);
pub static LIST_CORE_PREFERRED_SCHEDULING_TERM: Ty = Ty::List(&CORE_PREFERRED_SCHEDULING_TERM);
pub static LIST_CORE_RESOURCE_CLAIM: Ty = Ty::List(&CORE_RESOURCE_CLAIM);
pub static LIST_CORE_SYSCTL: Ty = Ty::List(&CORE_SYSCTL);
pub static LIST_CORE_TOLERATION: Ty = Ty::List(&CORE_TOLERATION);
pub static LIST_CORE_TOPOLOGY_SPREAD_CONSTRAINT: Ty = Ty::List(&CORE_TOPOLOGY_SPREAD_CONSTRAINT);
pub static LIST_CORE_VOLUME: Ty = Ty::List(&CORE_VOLUME);
pub static LIST_CORE_VOLUME_DEVICE: Ty = Ty::List(&CORE_VOLUME_DEVICE);
pub static LIST_CORE_VOLUME_MOUNT: Ty = Ty::List(&CORE_VOLUME_MOUNT);
pub static LIST_CORE_VOLUME_PROJECTION: Ty = Ty::List(&CORE_VOLUME_PROJECTION);
pub static LIST_CORE_WEIGHTED_POD_AFFINITY_TERM: Ty = Ty::List(&CORE_WEIGHTED_POD_AFFINITY_TERM);
pub static LIST_INT: Ty = Ty::List(&INT);
pub static LIST_JOBSET_DEPENDS_ON: Ty = Ty::List(&JOBSET_DEPENDS_ON);
pub static LIST_JOBSET_FAILURE_POLICY_RULE: Ty = Ty::List(&JOBSET_FAILURE_POLICY_RULE);
pub static LIST_JOBSET_REPLICATED_JOB: Ty = Ty::List(&JOBSET_REPLICATED_JOB);
pub static LIST_JOBSET_VOLUME_CLAIM_POLICY: Ty = Ty::List(&JOBSET_VOLUME_CLAIM_POLICY);
pub static LIST_META_CONDITION: Ty = Ty::List(&META_CONDITION);
pub static LIST_META_LABEL_SELECTOR_REQUIREMENT: Ty = Ty::List(&META_LABEL_SELECTOR_REQUIREMENT);
pub static LIST_META_MANAGED_FIELDS_ENTRY: Ty = Ty::List(&META_MANAGED_FIELDS_ENTRY);
pub static LIST_META_OWNER_REFERENCE: Ty = Ty::List(&META_OWNER_REFERENCE);
pub static LIST_STR: Ty = Ty::List(&STR);
pub static LIST_TRAINER_CONTAINER_PATCH: Ty = Ty::List(&TRAINER_CONTAINER_PATCH);
pub static LIST_TRAINER_ENV_INJECTION_TARGET: Ty = Ty::List(&TRAINER_ENV_INJECTION_TARGET);
pub static LIST_TRAINER_JOB_STATUS: Ty = Ty::List(&TRAINER_JOB_STATUS);
pub static LIST_TRAINER_METRIC: Ty = Ty::List(&TRAINER_METRIC);
pub static LIST_TRAINER_REPLICATED_JOB_PATCH: Ty = Ty::List(&TRAINER_REPLICATED_JOB_PATCH);
pub static LIST_TRAINER_RUNTIME_PATCH: Ty = Ty::List(&TRAINER_RUNTIME_PATCH);
pub static MAP_QTY: Ty = Ty::Map(&QTY);
pub static MAP_STR: Ty = Ty::Map(&STR);
/// `k8s.io/apimachinery/pkg/apis/meta/v1.Condition`.
pub static META_CONDITION: Ty = Ty::Struct(&[
    Field { key: "type", ty: &STR, omit: Never },
    Field { key: "status", ty: &STR, omit: Never },
    Field { key: "observedGeneration", ty: &INT, omit: Empty },
    Field { key: "lastTransitionTime", ty: &TIME, omit: Never },
    Field { key: "reason", ty: &STR, omit: Never },
    Field { key: "message", ty: &STR, omit: Never },
]);
/// `k8s.io/apimachinery/pkg/apis/meta/v1.LabelSelector`.
pub static META_LABEL_SELECTOR: Ty = Ty::Struct(&[
    Field { key: "matchLabels", ty: &MAP_STR, omit: Empty },
    Field { key: "matchExpressions", ty: &LIST_META_LABEL_SELECTOR_REQUIREMENT, omit: Empty },
]);
/// `k8s.io/apimachinery/pkg/apis/meta/v1.LabelSelectorRequirement`.
pub static META_LABEL_SELECTOR_REQUIREMENT: Ty = Ty::Struct(&[
    Field { key: "key", ty: &STR, omit: Never },
    Field { key: "operator", ty: &STR, omit: Never },
    Field { key: "values", ty: &LIST_STR, omit: Empty },
]);
/// `k8s.io/apimachinery/pkg/apis/meta/v1.ManagedFieldsEntry`.
pub static META_MANAGED_FIELDS_ENTRY: Ty = Ty::Struct(&[
    Field { key: "manager", ty: &STR, omit: Empty },
    Field { key: "operation", ty: &STR, omit: Empty },
    Field { key: "apiVersion", ty: &STR, omit: Empty },
    Field { key: "time", ty: &TIME, omit: Nil },
    Field { key: "fieldsType", ty: &STR, omit: Empty },
    Field { key: "fieldsV1", ty: &ANY, omit: Nil },
    Field { key: "subresource", ty: &STR, omit: Empty },
]);
/// `k8s.io/apimachinery/pkg/apis/meta/v1.ObjectMeta`.
pub static META_OBJECT_META: Ty = Ty::Struct(&[
    Field { key: "name", ty: &STR, omit: Empty },
    Field { key: "generateName", ty: &STR, omit: Empty },
    Field { key: "namespace", ty: &STR, omit: Empty },
    Field { key: "selfLink", ty: &STR, omit: Empty },
    Field { key: "uid", ty: &STR, omit: Empty },
    Field { key: "resourceVersion", ty: &STR, omit: Empty },
    Field { key: "generation", ty: &INT, omit: Empty },
    Field { key: "creationTimestamp", ty: &TIME, omit: Nil },
    Field { key: "deletionTimestamp", ty: &TIME, omit: Nil },
    Field { key: "deletionGracePeriodSeconds", ty: &INT, omit: Nil },
    Field { key: "labels", ty: &MAP_STR, omit: Empty },
    Field { key: "annotations", ty: &MAP_STR, omit: Empty },
    Field { key: "ownerReferences", ty: &LIST_META_OWNER_REFERENCE, omit: Empty },
    Field { key: "finalizers", ty: &LIST_STR, omit: Empty },
    Field { key: "managedFields", ty: &LIST_META_MANAGED_FIELDS_ENTRY, omit: Empty },
]);
/// `k8s.io/apimachinery/pkg/apis/meta/v1.OwnerReference`.
pub static META_OWNER_REFERENCE: Ty = Ty::Struct(&[
    Field { key: "apiVersion", ty: &STR, omit: Never },
    Field { key: "kind", ty: &STR, omit: Never },
    Field { key: "name", ty: &STR, omit: Never },
    Field { key: "uid", ty: &STR, omit: Never },
    Field { key: "controller", ty: &BOOL, omit: Nil },
    Field { key: "blockOwnerDeletion", ty: &BOOL, omit: Nil },
]);
/// `volcano.sh/apis/pkg/apis/scheduling/v1beta1.NetworkTopologySpec`.
pub static SCHEDULING_NETWORK_TOPOLOGY_SPEC: Ty = Ty::Struct(&[
    Field { key: "mode", ty: &STR, omit: Empty },
    Field { key: "highestTierAllowed", ty: &INT, omit: Nil },
]);
/// `github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1.ContainerPatch`.
pub static TRAINER_CONTAINER_PATCH: Ty = Ty::Struct(&[
    Field { key: "name", ty: &STR, omit: Empty },
    Field { key: "env", ty: &LIST_CORE_ENV_VAR, omit: Empty },
    Field { key: "volumeMounts", ty: &LIST_CORE_VOLUME_MOUNT, omit: Empty },
    Field { key: "securityContext", ty: &CORE_SECURITY_CONTEXT, omit: Nil },
]);
/// `github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1.CoschedulingPodGroupPolicySource`.
pub static TRAINER_COSCHEDULING_POD_GROUP_POLICY_SOURCE: Ty = Ty::Struct(&[
    Field { key: "scheduleTimeoutSeconds", ty: &INT, omit: Nil },
]);
/// `github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1.DatasetInitializer`.
pub static TRAINER_DATASET_INITIALIZER: Ty = Ty::Struct(&[
    Field { key: "storageUri", ty: &STR, omit: Nil },
    Field { key: "env", ty: &LIST_CORE_ENV_VAR, omit: Empty },
    Field { key: "secretRef", ty: &CORE_LOCAL_OBJECT_REFERENCE, omit: Nil },
]);
/// `github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1.EnvInjection`.
pub static TRAINER_ENV_INJECTION: Ty = Ty::Struct(&[
    Field { key: "targets", ty: &LIST_TRAINER_ENV_INJECTION_TARGET, omit: Empty },
]);
/// `github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1.EnvInjectionTarget`.
pub static TRAINER_ENV_INJECTION_TARGET: Ty = Ty::Struct(&[
    Field { key: "jobName", ty: &STR, omit: Empty },
    Field { key: "containerNames", ty: &LIST_STR, omit: Empty },
]);
/// `github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1.FluxMLPolicySource`.
pub static TRAINER_FLUX_ML_POLICY_SOURCE: Ty = Ty::Struct(&[
    Field { key: "numProcPerNode", ty: &INT, omit: Nil },
]);
/// `github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1.Initializer`.
pub static TRAINER_INITIALIZER: Ty = Ty::Struct(&[
    Field { key: "dataset", ty: &TRAINER_DATASET_INITIALIZER, omit: Nil },
    Field { key: "model", ty: &TRAINER_MODEL_INITIALIZER, omit: Nil },
]);
/// `github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1.JAXMLPolicySource`.
pub static TRAINER_JAXML_POLICY_SOURCE: Ty = Ty::Struct(&[
]);
/// `github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1.JobSetSpecPatch`.
pub static TRAINER_JOB_SET_SPEC_PATCH: Ty = Ty::Struct(&[
    Field { key: "replicatedJobs", ty: &LIST_TRAINER_REPLICATED_JOB_PATCH, omit: Empty },
]);
/// `github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1.JobSetTemplatePatch`.
pub static TRAINER_JOB_SET_TEMPLATE_PATCH: Ty = Ty::Struct(&[
    Field { key: "metadata", ty: &META_OBJECT_META, omit: Nil },
    Field { key: "spec", ty: &TRAINER_JOB_SET_SPEC_PATCH, omit: Nil },
]);
/// `github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1.JobSetTemplateSpec`.
pub static TRAINER_JOB_SET_TEMPLATE_SPEC: Ty = Ty::Struct(&[
    Field { key: "metadata", ty: &META_OBJECT_META, omit: Never },
    Field { key: "spec", ty: &JOBSET_JOB_SET_SPEC, omit: Never },
]);
/// `github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1.JobSpecPatch`.
pub static TRAINER_JOB_SPEC_PATCH: Ty = Ty::Struct(&[
    Field { key: "template", ty: &TRAINER_POD_TEMPLATE_PATCH, omit: Nil },
]);
/// `github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1.JobStatus`.
pub static TRAINER_JOB_STATUS: Ty = Ty::Struct(&[
    Field { key: "name", ty: &STR, omit: Empty },
    Field { key: "ready", ty: &INT, omit: Nil },
    Field { key: "succeeded", ty: &INT, omit: Nil },
    Field { key: "failed", ty: &INT, omit: Nil },
    Field { key: "active", ty: &INT, omit: Nil },
    Field { key: "suspended", ty: &INT, omit: Nil },
]);
/// `github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1.JobTemplatePatch`.
pub static TRAINER_JOB_TEMPLATE_PATCH: Ty = Ty::Struct(&[
    Field { key: "metadata", ty: &META_OBJECT_META, omit: Nil },
    Field { key: "spec", ty: &TRAINER_JOB_SPEC_PATCH, omit: Nil },
]);
/// `github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1.Metric`.
pub static TRAINER_METRIC: Ty = Ty::Struct(&[
    Field { key: "name", ty: &STR, omit: Empty },
    Field { key: "value", ty: &STR, omit: Empty },
]);
/// `github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1.MLPolicy`.
pub static TRAINER_ML_POLICY: Ty = Ty::Struct(&[
    Field { key: "numNodes", ty: &INT, omit: Nil },
    Field { key: "torch", ty: &TRAINER_TORCH_ML_POLICY_SOURCE, omit: Nil },
    Field { key: "mpi", ty: &TRAINER_MPIML_POLICY_SOURCE, omit: Nil },
    Field { key: "flux", ty: &TRAINER_FLUX_ML_POLICY_SOURCE, omit: Nil },
    Field { key: "jax", ty: &TRAINER_JAXML_POLICY_SOURCE, omit: Nil },
    Field { key: "xgboost", ty: &TRAINER_XG_BOOST_ML_POLICY_SOURCE, omit: Nil },
]);
/// `github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1.ModelInitializer`.
pub static TRAINER_MODEL_INITIALIZER: Ty = Ty::Struct(&[
    Field { key: "storageUri", ty: &STR, omit: Nil },
    Field { key: "env", ty: &LIST_CORE_ENV_VAR, omit: Empty },
    Field { key: "secretRef", ty: &CORE_LOCAL_OBJECT_REFERENCE, omit: Nil },
]);
/// `github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1.MPIMLPolicySource`.
pub static TRAINER_MPIML_POLICY_SOURCE: Ty = Ty::Struct(&[
    Field { key: "numProcPerNode", ty: &INT, omit: Nil },
    Field { key: "mpiImplementation", ty: &STR, omit: Nil },
    Field { key: "sshAuthMountPath", ty: &STR, omit: Nil },
    Field { key: "runLauncherAsNode", ty: &BOOL, omit: Nil },
]);
/// `github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1.PodGroupPolicy`.
pub static TRAINER_POD_GROUP_POLICY: Ty = Ty::Struct(&[
    Field { key: "coscheduling", ty: &TRAINER_COSCHEDULING_POD_GROUP_POLICY_SOURCE, omit: Nil },
    Field { key: "volcano", ty: &TRAINER_VOLCANO_POD_GROUP_POLICY_SOURCE, omit: Nil },
]);
/// `github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1.PodSpecPatch`.
pub static TRAINER_POD_SPEC_PATCH: Ty = Ty::Struct(&[
    Field { key: "serviceAccountName", ty: &STR, omit: Nil },
    Field { key: "volumes", ty: &LIST_CORE_VOLUME, omit: Empty },
    Field { key: "initContainers", ty: &LIST_TRAINER_CONTAINER_PATCH, omit: Empty },
    Field { key: "containers", ty: &LIST_TRAINER_CONTAINER_PATCH, omit: Empty },
    Field { key: "imagePullSecrets", ty: &LIST_CORE_LOCAL_OBJECT_REFERENCE, omit: Empty },
    Field { key: "securityContext", ty: &CORE_POD_SECURITY_CONTEXT, omit: Nil },
    Field { key: "nodeSelector", ty: &MAP_STR, omit: Empty },
    Field { key: "affinity", ty: &CORE_AFFINITY, omit: Nil },
    Field { key: "tolerations", ty: &LIST_CORE_TOLERATION, omit: Empty },
    Field { key: "schedulingGates", ty: &LIST_CORE_POD_SCHEDULING_GATE, omit: Empty },
    Field { key: "terminationGracePeriodSeconds", ty: &INT, omit: Nil },
]);
/// `github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1.PodTemplatePatch`.
pub static TRAINER_POD_TEMPLATE_PATCH: Ty = Ty::Struct(&[
    Field { key: "metadata", ty: &META_OBJECT_META, omit: Nil },
    Field { key: "spec", ty: &TRAINER_POD_SPEC_PATCH, omit: Nil },
]);
/// `github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1.ReplicatedJobPatch`.
pub static TRAINER_REPLICATED_JOB_PATCH: Ty = Ty::Struct(&[
    Field { key: "name", ty: &STR, omit: Empty },
    Field { key: "template", ty: &TRAINER_JOB_TEMPLATE_PATCH, omit: Nil },
]);
/// `github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1.RuntimePatch`.
pub static TRAINER_RUNTIME_PATCH: Ty = Ty::Struct(&[
    Field { key: "manager", ty: &STR, omit: Empty },
    Field { key: "time", ty: &TIME, omit: Nil },
    Field { key: "trainingRuntimeSpec", ty: &TRAINER_TRAINING_RUNTIME_SPEC_PATCH, omit: Nil },
]);
/// `github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1.RuntimeRef`.
pub static TRAINER_RUNTIME_REF: Ty = Ty::Struct(&[
    Field { key: "name", ty: &STR, omit: Empty },
    Field { key: "apiGroup", ty: &STR, omit: Nil },
    Field { key: "kind", ty: &STR, omit: Nil },
]);
/// `github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1.TorchMLPolicySource`.
pub static TRAINER_TORCH_ML_POLICY_SOURCE: Ty = Ty::Struct(&[
    Field { key: "envInjection", ty: &TRAINER_ENV_INJECTION, omit: Nil },
]);
/// `github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1.Trainer`.
pub static TRAINER_TRAINER: Ty = Ty::Struct(&[
    Field { key: "image", ty: &STR, omit: Nil },
    Field { key: "command", ty: &LIST_STR, omit: Empty },
    Field { key: "args", ty: &LIST_STR, omit: Empty },
    Field { key: "env", ty: &LIST_CORE_ENV_VAR, omit: Empty },
    Field { key: "numNodes", ty: &INT, omit: Nil },
    Field { key: "resourcesPerNode", ty: &CORE_RESOURCE_REQUIREMENTS, omit: Nil },
    Field { key: "numProcPerNode", ty: &INT, omit: Nil },
]);
/// `github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1.TrainerStatus`.
pub static TRAINER_TRAINER_STATUS: Ty = Ty::Struct(&[
    Field { key: "progressPercentage", ty: &INT, omit: Nil },
    Field { key: "estimatedRemainingSeconds", ty: &INT, omit: Nil },
    Field { key: "metrics", ty: &LIST_TRAINER_METRIC, omit: Empty },
    Field { key: "lastUpdatedTime", ty: &TIME, omit: Never },
]);
/// `github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1.TrainingRuntime`.
pub static TRAINER_TRAINING_RUNTIME: Ty = Ty::Struct(&[
    Field { key: "kind", ty: &STR, omit: Empty },
    Field { key: "apiVersion", ty: &STR, omit: Empty },
    Field { key: "metadata", ty: &META_OBJECT_META, omit: Never },
    Field { key: "spec", ty: &TRAINER_TRAINING_RUNTIME_SPEC, omit: Nil },
]);
/// `github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1.TrainingRuntimeSpec`.
pub static TRAINER_TRAINING_RUNTIME_SPEC: Ty = Ty::Struct(&[
    Field { key: "mlPolicy", ty: &TRAINER_ML_POLICY, omit: Nil },
    Field { key: "podGroupPolicy", ty: &TRAINER_POD_GROUP_POLICY, omit: Nil },
    Field { key: "template", ty: &TRAINER_JOB_SET_TEMPLATE_SPEC, omit: Nil },
]);
/// `github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1.TrainingRuntimeSpecPatch`.
pub static TRAINER_TRAINING_RUNTIME_SPEC_PATCH: Ty = Ty::Struct(&[
    Field { key: "template", ty: &TRAINER_JOB_SET_TEMPLATE_PATCH, omit: Nil },
]);
/// `github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1.TrainJob`.
pub static TRAINER_TRAIN_JOB: Ty = Ty::Struct(&[
    Field { key: "kind", ty: &STR, omit: Empty },
    Field { key: "apiVersion", ty: &STR, omit: Empty },
    Field { key: "metadata", ty: &META_OBJECT_META, omit: Never },
    Field { key: "spec", ty: &TRAINER_TRAIN_JOB_SPEC, omit: Nil },
    Field { key: "status", ty: &TRAINER_TRAIN_JOB_STATUS, omit: Nil },
]);
/// `github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1.TrainJobSpec`.
pub static TRAINER_TRAIN_JOB_SPEC: Ty = Ty::Struct(&[
    Field { key: "runtimeRef", ty: &TRAINER_RUNTIME_REF, omit: Nil },
    Field { key: "initializer", ty: &TRAINER_INITIALIZER, omit: Nil },
    Field { key: "trainer", ty: &TRAINER_TRAINER, omit: Nil },
    Field { key: "runtimePatches", ty: &LIST_TRAINER_RUNTIME_PATCH, omit: Empty },
    Field { key: "suspend", ty: &BOOL, omit: Nil },
    Field { key: "activeDeadlineSeconds", ty: &INT, omit: Empty },
    Field { key: "managedBy", ty: &STR, omit: Nil },
]);
/// `github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1.TrainJobStatus`.
pub static TRAINER_TRAIN_JOB_STATUS: Ty = Ty::Struct(&[
    Field { key: "conditions", ty: &LIST_META_CONDITION, omit: Empty },
    Field { key: "jobsStatus", ty: &LIST_TRAINER_JOB_STATUS, omit: Empty },
    Field { key: "trainerStatus", ty: &TRAINER_TRAINER_STATUS, omit: Nil },
]);
/// `github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1.VolcanoPodGroupPolicySource`.
pub static TRAINER_VOLCANO_POD_GROUP_POLICY_SOURCE: Ty = Ty::Struct(&[
    Field { key: "networkTopology", ty: &SCHEDULING_NETWORK_TOPOLOGY_SPEC, omit: Nil },
]);
/// `github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1.XGBoostMLPolicySource`.
pub static TRAINER_XG_BOOST_ML_POLICY_SOURCE: Ty = Ty::Struct(&[
]);
