package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	kubevirtv1 "kubevirt.io/api/core/v1"
)

// GroupVersion is hco.kubevirt.io/v1beta1.
var GroupVersion = schema.GroupVersion{Group: "hco.kubevirt.io", Version: "v1beta1"}

// AddToScheme registers the types of this package.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &HyperConverged{}, &HyperConvergedList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

// DefaultTektonPipelinesNamespace is where the catalog goes when the spec
// names no namespace.
const DefaultTektonPipelinesNamespace = "tekvirt"

// DefaultCommonTemplatesNamespace is where the common templates go when
// the spec names no namespace (SSP's default).
const DefaultCommonTemplatesNamespace = "openshift"

// HyperConvergedSpec is the supported subset of the upstream spec.
type HyperConvergedSpec struct {
	// TektonPipelinesNamespace is the namespace the catalog's Tasks and
	// Pipelines are installed into.
	// +kubebuilder:default=tekvirt
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=63
	// +optional
	TektonPipelinesNamespace *string `json:"tektonPipelinesNamespace,omitempty"`

	// CommonTemplatesNamespace is where the common VM templates are
	// installed, as SSP's (openshift when unset).
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=63
	// +optional
	CommonTemplatesNamespace *string `json:"commonTemplatesNamespace,omitempty"`

	// EvictionStrategy is the cluster-wide default of the VMIs' own
	// spec.evictionStrategy, as KubeVirt's: None lets a drain evict the
	// launcher Pod (the VMI stops), External refuses the eviction and marks
	// the VMI for evacuation (status.evacuationNodeName) for another
	// controller to act on, LiveMigrate refuses it and live-migrates the
	// VMI to another node (refuses only, for a VMI that cannot migrate),
	// LiveMigrateIfPossible migrates a VMI that can and lets the others'
	// Pods go. Unset is None.
	// +kubebuilder:validation:Enum=None;LiveMigrate;LiveMigrateIfPossible;External
	// +optional
	EvictionStrategy *kubevirtv1.EvictionStrategy `json:"evictionStrategy,omitempty"`

	// WorkloadUpdateStrategy is how running VMIs would be moved to a new
	// launcher version after an upgrade, with HCO's defaults.
	// +kubebuilder:default={"workloadUpdateMethods": {"LiveMigrate"}, "batchEvictionSize": 10, "batchEvictionInterval": "1m0s"}
	// +optional
	WorkloadUpdateStrategy HyperConvergedWorkloadUpdateStrategy `json:"workloadUpdateStrategy,omitempty"`

	// LiveMigrationConfig are the cluster's limits and options of live
	// migrations, with HCO's defaults (KubeVirt's). HCO's network field (a
	// dedicated migration network) is not implemented.
	// +kubebuilder:default={"completionTimeoutPerGiB": 150, "parallelMigrationsPerCluster": 5, "parallelOutboundMigrationsPerNode": 2, "progressTimeout": 150, "allowAutoConverge": false, "allowPostCopy": false}
	// +optional
	LiveMigrationConfig LiveMigrationConfigurations `json:"liveMigrationConfig,omitempty"`
}

// LiveMigrationConfigurations is HCO's liveMigrationConfig.
type LiveMigrationConfigurations struct {
	// ParallelMigrationsPerCluster is how many migrations run in the
	// cluster at once; more wait in Pending.
	// +kubebuilder:validation:Minimum=1
	// +optional
	ParallelMigrationsPerCluster *uint32 `json:"parallelMigrationsPerCluster,omitempty"`
	// ParallelOutboundMigrationsPerNode is how many migrations leave one
	// node at once.
	// +kubebuilder:validation:Minimum=1
	// +optional
	ParallelOutboundMigrationsPerNode *uint32 `json:"parallelOutboundMigrationsPerNode,omitempty"`
	// BandwidthPerMigration caps each migration's bandwidth (a quantity
	// per second, as "64Mi"); 0 or unset: no cap.
	// +kubebuilder:validation:Pattern=`^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$`
	// +optional
	BandwidthPerMigration *string `json:"bandwidthPerMigration,omitempty"`
	// CompletionTimeoutPerGiB: a migration that takes longer than this
	// many seconds per GiB of memory and local disk is aborted.
	// +kubebuilder:validation:Minimum=1
	// +optional
	CompletionTimeoutPerGiB *int64 `json:"completionTimeoutPerGiB,omitempty"`
	// ProgressTimeout: a migration whose remaining data does not shrink
	// for this many seconds is aborted.
	// +kubebuilder:validation:Minimum=1
	// +optional
	ProgressTimeout *int64 `json:"progressTimeout,omitempty"`
	// AllowAutoConverge lets libvirt throttle a guest's CPUs so that a
	// migration of a guest dirtying memory quickly converges.
	// +optional
	AllowAutoConverge *bool `json:"allowAutoConverge,omitempty"`
	// AllowPostCopy lets a migration that does not converge switch to
	// post-copy: the guest runs at the target while its memory follows.
	// +optional
	AllowPostCopy *bool `json:"allowPostCopy,omitempty"`
}

// HyperConvergedWorkloadUpdateStrategy is HCO's workload update strategy.
type HyperConvergedWorkloadUpdateStrategy struct {
	// WorkloadUpdateMethods are the methods tried, in order: LiveMigrate,
	// Evict. None (an empty list) leaves running VMIs alone.
	// +kubebuilder:validation:items:Enum=LiveMigrate;Evict
	// +listType=atomic
	// +kubebuilder:default={"LiveMigrate"}
	// +optional
	WorkloadUpdateMethods []string `json:"workloadUpdateMethods,omitempty"`
	// BatchEvictionSize is how many VMIs are evicted at once.
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=1
	// +optional
	BatchEvictionSize *int `json:"batchEvictionSize,omitempty"`
	// BatchEvictionInterval is the pause between batches.
	// +kubebuilder:default="1m0s"
	// +optional
	BatchEvictionInterval *metav1.Duration `json:"batchEvictionInterval,omitempty"`
}

// HyperConvergedStatus mirrors the upstream status conditions.
type HyperConvergedStatus struct {
	// Conditions are Available, Progressing, Degraded and ReconcileComplete.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// ObservedGeneration is the spec generation the conditions describe.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// InstalledObjects counts the catalog objects applied on the last reconcile.
	// +optional
	InstalledObjects int `json:"installedObjects,omitempty"`
	// Versions name what runs once every component is ready: "tekvirt"
	// is a digest of the component images.
	// +listType=map
	// +listMapKey=name
	// +optional
	Versions []Version `json:"versions,omitempty"`
	// RelatedObjects are the components the operator deploys.
	// +listType=atomic
	// +optional
	RelatedObjects []corev1.ObjectReference `json:"relatedObjects,omitempty"`
}

// Version is a component's name and version.
type Version struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// HyperConverged is the single entry object of the installation.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=hco;hcos
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Available",type=string,JSONPath=`.status.conditions[?(@.type=="Available")].status`
type HyperConverged struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +kubebuilder:default={}
	Spec   HyperConvergedSpec   `json:"spec,omitempty"`
	Status HyperConvergedStatus `json:"status,omitempty"`
}

// CatalogNamespace is the namespace the catalog goes into.
func (h *HyperConverged) CatalogNamespace() string {
	if h.Spec.TektonPipelinesNamespace == nil || *h.Spec.TektonPipelinesNamespace == "" {
		return DefaultTektonPipelinesNamespace
	}
	return *h.Spec.TektonPipelinesNamespace
}

// TemplatesNamespace is the namespace the common templates go into.
func (h *HyperConverged) TemplatesNamespace() string {
	if h.Spec.CommonTemplatesNamespace == nil || *h.Spec.CommonTemplatesNamespace == "" {
		return DefaultCommonTemplatesNamespace
	}
	return *h.Spec.CommonTemplatesNamespace
}

// HyperConvergedList is a list of HyperConverged.
// +kubebuilder:object:root=true
type HyperConvergedList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []HyperConverged `json:"items"`
}
