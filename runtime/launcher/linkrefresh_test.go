package launcher

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "kubevirt.io/api/core/v1"
)

// TestLinksToRefresh: only the pod network's bridge interface of a VMI
// KubeVirt's annotation lets migrate is refreshed on arrival; masquerade
// (the guest keeps its private address) and secondary bridges are not.
func TestLinksToRefresh(t *testing.T) {
	bridge := v1.InterfaceBindingMethod{Bridge: &v1.InterfaceBridge{}}
	masq := v1.InterfaceBindingMethod{Masquerade: &v1.InterfaceMasquerade{}}
	vmi := func(annotated bool, onPod v1.InterfaceBindingMethod) *v1.VirtualMachineInstance {
		v := &v1.VirtualMachineInstance{Spec: v1.VirtualMachineInstanceSpec{
			Domain: v1.DomainSpec{Devices: v1.Devices{Interfaces: []v1.Interface{
				{Name: "default", InterfaceBindingMethod: onPod},
				{Name: "red", InterfaceBindingMethod: bridge},
			}}},
			Networks: []v1.Network{*v1.DefaultPodNetwork(), {Name: "red", NetworkSource: v1.NetworkSource{Multus: &v1.MultusNetwork{NetworkName: "blue"}}}},
		}}
		if annotated {
			v.ObjectMeta = metav1.ObjectMeta{Annotations: map[string]string{v1.AllowPodBridgeNetworkLiveMigrationAnnotation: ""}}
		}
		return v
	}
	for _, tc := range []struct {
		name string
		vmi  *v1.VirtualMachineInstance
		want []string
	}{
		{"bridge, annotated", vmi(true, bridge), []string{"ua-default"}},
		{"bridge, not annotated", vmi(false, bridge), nil},
		{"masquerade, annotated", vmi(true, masq), nil},
	} {
		if got := linksToRefresh(tc.vmi); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
