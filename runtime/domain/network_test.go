package domain

import (
	"strings"
	"testing"

	v1 "kubevirt.io/api/core/v1"
)

func TestNICs(t *testing.T) {
	masq := v1.InterfaceBindingMethod{Masquerade: &v1.InterfaceMasquerade{}}
	bridge := v1.InterfaceBindingMethod{Bridge: &v1.InterfaceBridge{}}
	pod := v1.NetworkSource{Pod: &v1.PodNetwork{}}
	multus := v1.NetworkSource{Multus: &v1.MultusNetwork{NetworkName: "blue"}}
	for _, tc := range []struct {
		name     string
		ifaces   []v1.Interface
		networks []v1.Network
		want     []string // each NIC's name and Pod interface
		err      string
	}{
		{name: "KubeVirt's default", want: []string{"default eth0"}},
		{name: "interfaces without networks are on the pod network", ifaces: []v1.Interface{{Name: "a", InterfaceBindingMethod: bridge}}, want: []string{"a eth0"}},
		{name: "the pod network and a Multus one",
			ifaces:   []v1.Interface{{Name: "default", InterfaceBindingMethod: masq}, {Name: "red", InterfaceBindingMethod: bridge}},
			networks: []v1.Network{{Name: "default", NetworkSource: pod}, {Name: "red", NetworkSource: multus}},
			want:     []string{"default eth0", "red podb1f51a511f1"}},
		{name: "a Multus network alone", ifaces: []v1.Interface{{Name: "red", InterfaceBindingMethod: bridge}},
			networks: []v1.Network{{Name: "red", NetworkSource: multus}}, want: []string{"red podb1f51a511f1"}},
		{name: "masquerade on a Multus network", ifaces: []v1.Interface{{Name: "red", InterfaceBindingMethod: masq}},
			networks: []v1.Network{{Name: "red", NetworkSource: multus}}, err: "spec.domain.devices.interfaces[0] (red): only the bridge binding to a Multus network"},
		{name: "two on the pod network", ifaces: []v1.Interface{{Name: "a", InterfaceBindingMethod: masq}, {Name: "b", InterfaceBindingMethod: bridge}},
			networks: []v1.Network{{Name: "a", NetworkSource: pod}, {Name: "b", NetworkSource: pod}}, err: "spec.domain.devices.interfaces[1] (b): a is already on the pod network"},
		{name: "no network of its name", ifaces: []v1.Interface{{Name: "a", InterfaceBindingMethod: masq}},
			networks: []v1.Network{{Name: "b", NetworkSource: pod}}, err: "spec.domain.devices.interfaces[0] (a): no network of that name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vmi := &v1.VirtualMachineInstance{}
			vmi.Spec.Domain.Devices.Interfaces, vmi.Spec.Networks = tc.ifaces, tc.networks
			nics, err := NICs(vmi)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %s", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, n := range nics {
				got = append(got, n.Name+" "+n.PodInterface)
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("NICs %q, want %q", got, tc.want)
			}
		})
	}
}
