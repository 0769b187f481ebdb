// Package config embeds the controller's deployment manifests: the CRDs and
// RBAC that controller-gen generates (crd/, rbac/role.yaml), the hand-written
// binding and Deployment (rbac/, manager/), the admission policies that
// limit the controller and node handlers beyond RBAC (admission/), the
// privileged namespace of the node daemons (node/), the hostpath storage's
// CSI driver with its DaemonSet (the driver and Kubernetes' CSI sidecars),
// RBAC, default StorageClass, shared one and VolumeSnapshotClass, and the
// snapshot controller (hostpath/; the snapshot CRDs are the
// external-snapshotter's own, in crd/), the
// VM handler's DaemonSet and RBAC (handler/), the KubeVirt (instancetypes, migrations and VM snapshots included), CDI, HyperShift and OpenShift Template CRDs generated from their Go API modules (crd/; the Template CRD only where the API is not served), the
// validating webhook and the mutating one that records requesters and writes VM defaults (webhook/; their
// serving certificate Secret and caBundle come from the operator), the upload API's APIService and
// Services (upload/), the subresources.kubevirt.io APIService (subresources/), the user roles aggregated into admin, edit and view
// (users/), the golden image namespace and its readers'
// RBAC (golden/), the server of the clients users download (downloads/), and the default HyperConverged
// (samples/), and the operator that deploys the rest: its Deployment and
// RBAC, and the role that lets every authenticated user read the CA bundle
// (operator/). Images are named ko://<import path> and resolved on install.
package config

import "embed"

// FS holds every manifest under this folder.
//
//go:embed admission/*.yaml downloads/*.yaml crd/*.yaml hosted/*.yaml rbac/*.yaml manager/*.yaml samples/*.yaml node/*.yaml operator/*.yaml hostpath/*.yaml handler/*.yaml webhook/*.yaml upload/*.yaml networkaddons/*.yaml subresources/*.yaml golden/*.yaml users/*.yaml
var FS embed.FS

// Files are what the release installs, in the order they are applied: the
// namespaces, CRDs, every component's RBAC, the admission policies and the
// operator, which deploys ComponentFiles.
var Files = []string{
	"manager/namespace.yaml",
	"node/namespace.yaml",
	"crd/hco.kubevirt.io_hyperconvergeds.yaml",
	"crd/kubevirt.io_virtualmachines.yaml",
	"crd/kubevirt.io_virtualmachineinstances.yaml",
	"crd/kubevirt.io_virtualmachineinstancemigrations.yaml",
	"crd/migrations.kubevirt.io_migrationpolicies.yaml",
	"crd/snapshot.kubevirt.io_virtualmachinesnapshots.yaml",
	"crd/snapshot.kubevirt.io_virtualmachinesnapshotcontents.yaml",
	"crd/snapshot.kubevirt.io_virtualmachinerestores.yaml",
	"crd/cdi.kubevirt.io_datavolumes.yaml",
	"crd/cdi.kubevirt.io_datasources.yaml",
	"crd/cdi.kubevirt.io_dataimportcrons.yaml",
	"crd/instancetype.kubevirt.io_virtualmachineinstancetypes.yaml",
	"crd/instancetype.kubevirt.io_virtualmachineclusterinstancetypes.yaml",
	"crd/instancetype.kubevirt.io_virtualmachinepreferences.yaml",
	"crd/instancetype.kubevirt.io_virtualmachineclusterpreferences.yaml",
	"crd/hypershift.openshift.io_hostedclusters.yaml",
	"crd/hypershift.openshift.io_nodepools.yaml",
	"crd/networkaddonsoperator.network.kubevirt.io_networkaddonsconfigs.yaml",
	"crd/k8s.cni.cncf.io_network-attachment-definitions.yaml",
	"crd/snapshot.storage.k8s.io_volumesnapshotclasses.yaml",
	"crd/snapshot.storage.k8s.io_volumesnapshotcontents.yaml",
	"crd/snapshot.storage.k8s.io_volumesnapshots.yaml",
	"rbac/role.yaml",
	"rbac/service_account.yaml",
	"rbac/role_binding.yaml",
	"rbac/metrics_reader.yaml",
	"admission/policies.yaml",
	"users/roles.yaml",
	"users/common_templates_reader.yaml",
	"hostpath/role.yaml",
	"hostpath/service_account.yaml",
	"hostpath/role_binding.yaml",
	"hostpath/sidecars_rbac.yaml",
	"hostpath/snapshot_controller_rbac.yaml",
	"handler/role.yaml",
	"handler/service_account.yaml",
	"handler/role_binding.yaml",
	"networkaddons/rbac.yaml",
	"golden/namespace.yaml",
	"operator/ca_reader.yaml",
	"hosted/release_reader.yaml",
	"hosted/control_plane_access.yaml",
	"operator/role.yaml",
	"operator/service_account.yaml",
	"operator/role_binding.yaml",
	"operator/operator.yaml",
}

// ComponentFiles are what the operator deploys and keeps as written, with
// their images, CA bundles and serving certificates filled in: the
// controller with its webhooks, upload API and upload proxy, the default
// StorageClass and the node daemons.
var ComponentFiles = []string{
	"webhook/service.yaml",
	"upload/service.yaml",
	"manager/manager.yaml",
	"webhook/mutating.yaml",
	"webhook/validating.yaml",
	"upload/apiservice.yaml",
	"subresources/apiservice.yaml",
	"hostpath/csidriver.yaml",
	"hostpath/storageclass.yaml",
	"hostpath/storageclass-shared.yaml",
	"hostpath/snapshotclass.yaml",
	"hostpath/daemonset.yaml",
	"hostpath/snapshot_controller.yaml",
	"handler/daemonset.yaml",
	"hosted/release.yaml",
	"downloads/downloads.yaml",
}

// The network add-ons the operator deploys as the NetworkAddonsConfig
// asks (CNAO's components): Multus, and the bridge CNI plugin. Their RBAC
// is in Files.
const (
	MultusFile      = "networkaddons/multus.yaml"
	LinuxBridgeFile = "networkaddons/linuxbridge.yaml"
	// The DaemonSets they hold, in NodeNamespace.
	MultusDaemonSet       = "multus"
	BridgePluginDaemonSet = "bridge-plugin"
	// MultusUser is who Multus's plugin acts as on the nodes.
	MultusUser = "system:serviceaccount:" + NodeNamespace + ":multus"
)

// NetworkAddonFiles are all of them.
var NetworkAddonFiles = []string{MultusFile, LinuxBridgeFile}

// DefaultHyperConverged is the entry object `tekvirt up` creates.
const DefaultHyperConverged = "samples/hyperconverged.yaml"

// Namespace is where the operator and the controller run.
const Namespace = "tekvirt-system"

// OperatorDeployment runs the HyperConverged reconciler, as OperatorUser.
const (
	OperatorDeployment = "tekvirt-operator"
	OperatorUser       = "system:serviceaccount:" + Namespace + ":tekvirt-operator"
)

// ControllerServiceAccount is the controller's ServiceAccount in Namespace,
// and ControllerUser the user name it authenticates as.
const (
	ControllerServiceAccount = "tekvirt-controller"
	ControllerUser           = "system:serviceaccount:" + Namespace + ":" + ControllerServiceAccount
)

// NodeNamespace holds the node daemons, the only privileged Pods tekvirt
// runs: the VM handler and the hostpath storage DaemonSets.
const NodeNamespace = "tekvirt-node"

// Every node's VM handler authenticates as HandlerUser with a token bound
// to its Pod, whose node the API server adds to the user's extra as
// NodeNameExtra; admission/policies.yaml limits each handler to that
// node's objects.
const (
	HandlerDaemonSet  = "tekvirt-handler"
	HandlerUser       = "system:serviceaccount:" + NodeNamespace + ":tekvirt-handler"
	NodeNameExtra     = "authentication.kubernetes.io/node-name"
	HostpathDaemonSet = "tekvirt-hostpath"
	// SnapshotControllerDeployment is Kubernetes' snapshot controller, in
	// Namespace.
	SnapshotControllerDeployment = "snapshot-controller"
	// HandlerCertSecret holds the serving certificate of the handlers'
	// exec endpoint (tls.crt, tls.key), valid for every node's name.
	HandlerCertSecret = "tekvirt-handler-cert"
)

// GoldenNamespace holds the golden images (DataSources) every user may
// clone from and only admins and the golden-image pipeline import into.
const GoldenNamespace = "tekvirt-os-images"

// MutatingWebhookPath is where the controller serves the mutating webhook
// of webhook/mutating.yaml (requesters and VM defaults, in one call).
const MutatingWebhookPath = "/mutate-kubevirt-io-v1"

// WebhookSecret holds the webhook's serving certificate (tls.crt, tls.key)
// for WebhookService.
const (
	WebhookSecret  = "tekvirt-webhook-cert"
	WebhookService = "tekvirt-webhook"
	// APIService and UploadProxyService are the other Services the
	// webhook's certificate serves.
	APIService         = "tekvirt-api"
	UploadProxyService = "cdi-uploadproxy"
)

// DownloadsService serves the clients tekvirt ships for users
// (downloads/), with the certificate in DownloadsSecret; DownloadsDeployment
// runs it.
const (
	DownloadsService    = "tekvirt-cli-downloads"
	DownloadsDeployment = "tekvirt-cli-downloads"
	DownloadsSecret     = "tekvirt-cli-downloads-cert"
)
