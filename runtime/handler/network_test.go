package handler

import (
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/contracts/podnetwork"
	"github.com/tekvirt/tekvirt/runtime/domain"
	"github.com/tekvirt/tekvirt/runtime/podnet"
)

func TestPlanBinding(t *testing.T) {
	vmi := func(iface v1.Interface, cidr string) *v1.VirtualMachineInstance {
		return &v1.VirtualMachineInstance{
			ObjectMeta: metav1.ObjectMeta{UID: "uid-1"},
			Spec: v1.VirtualMachineInstanceSpec{
				Domain:   v1.DomainSpec{Devices: v1.Devices{Interfaces: []v1.Interface{iface}}},
				Networks: []v1.Network{{Name: "default", NetworkSource: v1.NetworkSource{Pod: &v1.PodNetwork{VMNetworkCIDR: cidr}}}},
			},
		}
	}
	masq := v1.InterfaceBindingMethod{Masquerade: &v1.InterfaceMasquerade{}}
	bridge := v1.InterfaceBindingMethod{Bridge: &v1.InterfaceBridge{}}
	for _, tc := range []struct {
		name      string
		iface     v1.Interface
		cidr      string
		mac, addr string
		ports     []podnet.Port
		bridge    bool // and the MAC is the interface's (else the Pod's)
		statusMAC string
		err       string
	}{
		{name: "bridge on a migration's target: the MAC the guest took", iface: v1.Interface{Name: "default", InterfaceBindingMethod: bridge},
			statusMAC: "0a:58:0a:f4:01:07", bridge: true, mac: "0a:58:0a:f4:01:07"},
		{name: "bridge with its MAC, whatever the status says", iface: v1.Interface{Name: "default", InterfaceBindingMethod: bridge, MacAddress: "02:00:00:00:00:0b"},
			statusMAC: "0a:58:0a:f4:01:07", bridge: true, mac: "02:00:00:00:00:0b"},
		{name: "bridge: the Pod's MAC", iface: v1.Interface{Name: "default", InterfaceBindingMethod: bridge}, bridge: true},
		{name: "bridge with its MAC", iface: v1.Interface{Name: "default", InterfaceBindingMethod: bridge, MacAddress: "02:00:00:00:00:0b"}, bridge: true, mac: "02:00:00:00:00:0b"},
		{name: "bridge, bad MAC", iface: v1.Interface{Name: "default", InterfaceBindingMethod: bridge, MacAddress: "x"},
			err: `spec.domain.devices.interfaces[0].macAddress "x"`},
		{name: "defaults: every port", iface: v1.Interface{Name: "default", InterfaceBindingMethod: masq},
			mac: podnetwork.MAC("uid-1", "default").String(), addr: "10.0.2.2/24"},
		{name: "listed ports only, TCP unless said", iface: v1.Interface{Name: "default", InterfaceBindingMethod: masq, Ports: []v1.Port{{Port: 80}, {Protocol: "UDP", Port: 53}}},
			mac: podnetwork.MAC("uid-1", "default").String(), addr: "10.0.2.2/24", ports: []podnet.Port{{Protocol: "tcp", Port: 80}, {Protocol: "udp", Port: 53}}},
		{name: "its MAC and network", iface: v1.Interface{Name: "default", InterfaceBindingMethod: masq, MacAddress: "02:00:00:00:00:0A"}, cidr: "10.20.0.0/16",
			mac: "02:00:00:00:00:0a", addr: "10.20.0.2/16"},
		{name: "bad MAC", iface: v1.Interface{Name: "default", InterfaceBindingMethod: masq, MacAddress: "02:00"},
			err: `spec.domain.devices.interfaces[0].macAddress "02:00"`},
		{name: "bad network", iface: v1.Interface{Name: "default", InterfaceBindingMethod: masq}, cidr: "10.0.0.0/30",
			err: `spec.networks[0].pod: vmNetworkCIDR "10.0.0.0/30"`},
		{name: "SCTP port", iface: v1.Interface{Name: "default", InterfaceBindingMethod: masq, Ports: []v1.Port{{Protocol: "SCTP", Port: 9}}},
			err: "spec.domain.devices.interfaces[0].ports[0]: SCTP port 9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := vmi(tc.iface, tc.cidr)
			if tc.statusMAC != "" {
				v.Status.Interfaces = []v1.VirtualMachineInstanceNetworkInterface{{Name: "other", MAC: "02:00:00:00:00:ff"}, {Name: "default", MAC: tc.statusMAC}}
			}
			nics, err := domain.NICs(v)
			if err != nil {
				t.Fatal(err)
			}
			b, err := planBinding(v, 0, nics[0])
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %s", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.bridge {
				if b.bridge == nil || b.masquerade != nil || b.explicitMAC != (tc.mac != "") || b.bridge.Tap != "tap0" || b.bridge.Owner != 107 {
					t.Fatalf("plan %+v, want a bridge on tap0, explicit MAC %v", b, tc.mac != "")
				}
				if tc.mac != "" && b.bridge.MAC.String() != tc.mac {
					t.Errorf("MAC %s, want %s", b.bridge.MAC, tc.mac)
				}
				return
			}
			m := b.masquerade
			if m == nil {
				t.Fatalf("plan %+v, want masquerade", b)
			}
			if m.MAC.String() != tc.mac || m.Addresses.Guest.String() != tc.addr || !reflect.DeepEqual(m.Ports, tc.ports) || m.Tap != "tap0" || m.Owner != 107 {
				t.Errorf("got %+v, want MAC %s guest %s ports %v on tap0 owned by 107", m, tc.mac, tc.addr, tc.ports)
			}
		})
	}
}

// A Multus network's interface: bridged under KubeVirt's names for it,
// at layer 2, the MAC the interface's when it names one.
func TestPlanSecondaryBinding(t *testing.T) {
	vmi := &v1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{UID: "uid-1"},
		Spec: v1.VirtualMachineInstanceSpec{
			Domain: v1.DomainSpec{Devices: v1.Devices{Interfaces: []v1.Interface{
				{Name: "default", InterfaceBindingMethod: v1.InterfaceBindingMethod{Masquerade: &v1.InterfaceMasquerade{}}},
				{Name: "red", MacAddress: "02:00:00:00:00:0d", InterfaceBindingMethod: v1.InterfaceBindingMethod{Bridge: &v1.InterfaceBridge{}}},
			}}},
			Networks: []v1.Network{*v1.DefaultPodNetwork(), {Name: "red", NetworkSource: v1.NetworkSource{Multus: &v1.MultusNetwork{NetworkName: "blue"}}}},
		},
	}
	nics, err := domain.NICs(vmi)
	if err != nil || len(nics) != 2 {
		t.Fatalf("NICs %+v, %v", nics, err)
	}
	b, err := planBinding(vmi, 1, nics[1])
	if err != nil {
		t.Fatal(err)
	}
	br := b.bridge
	if br == nil || !b.secondary || !b.explicitMAC || br.PodInterface != "podb1f51a511f1" || br.Name != "k6t-b1f51a511f1" || br.Tap != "tapb1f51a511f1" || br.MAC.String() != "02:00:00:00:00:0d" {
		t.Errorf("plan %+v, bridge %+v", b, br)
	}
}
