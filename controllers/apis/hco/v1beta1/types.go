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
	// controller to act on, LiveMigrate refuses it (no VMI is migratable
	// here), LiveMigrateIfPossible lets it through likewise. Unset is None.
	// +kubebuilder:validation:Enum=None;LiveMigrate;LiveMigrateIfPossible;External
	// +optional
	EvictionStrategy *kubevirtv1.EvictionStrategy `json:"evictionStrategy,omitempty"`

	// WorkloadUpdateStrategy is how running VMIs would be moved to a new
	// launcher version after an upgrade, with HCO's defaults.
	// +kubebuilder:default={"workloadUpdateMethods": {"LiveMigrate"}, "batchEvictionSize": 10, "batchEvictionInterval": "1m0s"}
	// +optional
	WorkloadUpdateStrategy HyperConvergedWorkloadUpdateStrategy `json:"workloadUpdateStrategy,omitempty"`
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
