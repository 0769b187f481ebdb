package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is networkaddonsoperator.network.kubevirt.io/v1.
var GroupVersion = schema.GroupVersion{Group: "networkaddonsoperator.network.kubevirt.io", Version: "v1"}

// AddToScheme registers the types of this package.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &NetworkAddonsConfig{}, &NetworkAddonsConfigList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

// Name is the one NetworkAddonsConfig the operator acts on, as CNAO's.
const Name = "cluster"

// NetworkAddonsConfigSpec is the supported subset of the upstream spec.
type NetworkAddonsConfigSpec struct {
	// Multus deploys Multus (its thin plugin) on every node: Pods and VMs
	// join the networks NetworkAttachmentDefinitions describe.
	// +optional
	Multus *Multus `json:"multus,omitempty"`
	// LinuxBridge installs the bridge CNI plugin on every node, which
	// NetworkAttachmentDefinitions of type bridge use.
	// +optional
	LinuxBridge *LinuxBridge `json:"linuxBridge,omitempty"`
	// KubeMacPool turns on the MAC pool: every VirtualMachine interface
	// without a MAC gets one of the range at admission.
	// +optional
	KubeMacPool *KubeMacPool `json:"kubeMacPool,omitempty"`
	// ImagePullPolicy of the add-ons' workloads.
	// +kubebuilder:validation:Enum=Always;IfNotPresent;Never
	// +optional
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`
}

// Multus has no settings: present, it is deployed.
type Multus struct{}

// LinuxBridge has no settings: present, the plugin is installed.
type LinuxBridge struct{}

// KubeMacPool is the range MACs are taken from, both ends included; the
// operator picks one when they are unset, as CNAO does.
type KubeMacPool struct {
	// +kubebuilder:validation:Pattern=`^([0-9A-Fa-f]{2}:){5}[0-9A-Fa-f]{2}$`
	// +optional
	RangeStart string `json:"rangeStart,omitempty"`
	// +kubebuilder:validation:Pattern=`^([0-9A-Fa-f]{2}:){5}[0-9A-Fa-f]{2}$`
	// +optional
	RangeEnd string `json:"rangeEnd,omitempty"`
}

// NetworkAddonsConfigStatus mirrors the upstream status.
type NetworkAddonsConfigStatus struct {
	// +optional
	Conditions []Condition `json:"conditions,omitempty"`
	// +optional
	ObservedVersion string `json:"observedVersion,omitempty"`
	// +optional
	OperatorVersion string `json:"operatorVersion,omitempty"`
	// +optional
	TargetVersion string `json:"targetVersion,omitempty"`
}

// Condition is CNAO's condition (openshift/custom-resource-status'
// shape): Available, Progressing or Degraded.
type Condition struct {
	Type   string                 `json:"type"`
	Status corev1.ConditionStatus `json:"status"`
	// +optional
	Reason string `json:"reason,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
	// +optional
	LastHeartbeatTime metav1.Time `json:"lastHeartbeatTime,omitempty"`
	// +optional
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
}

// NetworkAddonsConfig configures the network add-ons: as CNAO's, one
// cluster-scoped object named "cluster".
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NetworkAddonsConfig struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   NetworkAddonsConfigSpec   `json:"spec,omitempty"`
	Status NetworkAddonsConfigStatus `json:"status,omitempty"`
}

// NetworkAddonsConfigList is a list of NetworkAddonsConfigs.
//
// +kubebuilder:object:root=true
type NetworkAddonsConfigList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NetworkAddonsConfig `json:"items"`
}
