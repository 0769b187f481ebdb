package vmwebhook

import (
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	v1 "kubevirt.io/api/core/v1"
)

func TestCheckRunnable(t *testing.T) {
	for _, tc := range []struct {
		name, spec string
		needMemory bool
		// want are substrings of the one message per problem, in order.
		want []string
	}{
		{"runs", `{domain: {memory: {guest: 64Mi}, devices: {disks: [{name: d}], interfaces: [{name: default, masquerade: {}}]}}, networks: [{name: default, pod: {}}], volumes: [{name: d}]}`, true, nil},
		{"a disk without volume", `{domain: {memory: {guest: 64Mi}, devices: {disks: [{name: d}, {name: e}]}}, volumes: [{name: d}]}`, true,
			[]string{`spec.domain.devices.disks[1].name: no volume named "e" in spec.volumes`}},
		{"two pod networks", `{domain: {memory: {guest: 64Mi}, devices: {interfaces: [{name: a, masquerade: {}}, {name: b, bridge: {}}]}}, networks: [{name: a, pod: {}}, {name: b, pod: {}}]}`, true,
			[]string{"spec.networks[1] (b): spec.networks[0] is already the pod network; a VMI has one"}},
		{"the pod network and two Multus ones", `{domain: {memory: {guest: 64Mi}, devices: {interfaces: [{name: a, masquerade: {}}, {name: b, bridge: {}}, {name: c, bridge: {}}]}}, networks: [{name: a, pod: {}}, {name: b, multus: {networkName: blue}}, {name: c, multus: {networkName: own/red}}]}`, true, nil},
		{"masquerade on a Multus network", `{domain: {memory: {guest: 64Mi}, devices: {interfaces: [{name: b, masquerade: {}}]}}, networks: [{name: b, multus: {networkName: blue}}]}`, true,
			[]string{`spec.domain.devices.interfaces[0] (b): the Multus network "blue" takes the bridge binding only`}},
		{"a bad network name, pod and multus at once", `{domain: {memory: {guest: 64Mi}, devices: {interfaces: [{name: b, bridge: {}}, {name: c, bridge: {}}]}}, networks: [{name: b, multus: {networkName: "a/b/c"}}, {name: c, pod: {}, multus: {networkName: x}}]}`, true,
			[]string{`spec.networks[0].multus.networkName "a/b/c": name "b/c"`, "spec.networks[1] (c): pod and multus both given"}},
		{"an interface without network and a network without interface", `{domain: {memory: {guest: 64Mi}, devices: {interfaces: [{name: a, masquerade: {}}]}}, networks: [{name: b, pod: {}}]}`, true,
			[]string{`spec.domain.devices.interfaces[0].name: no network named "a"`, `spec.networks[0].name: no interface named "b"`}},
		{"its MAC and masquerade network", `{domain: {memory: {guest: 64Mi}, devices: {interfaces: [{name: default, masquerade: {}, macAddress: "02:00:00:00:00:01"}]}}, networks: [{name: default, pod: {vmNetworkCIDR: 10.11.0.0/24}}]}`, true, nil},
		{"a bad MAC and a network too small", `{domain: {memory: {guest: 64Mi}, devices: {interfaces: [{name: default, masquerade: {}, macAddress: "02:00"}]}}, networks: [{name: default, pod: {vmNetworkCIDR: 10.11.0.0/30}}]}`, true,
			[]string{`spec.domain.devices.interfaces[0].macAddress: "02:00" is not an Ethernet address`, `spec.networks[0].pod.vmNetworkCIDR "10.11.0.0/30": want an IPv4 network of /29 or larger`}},
		{"its IPv6 masquerade network", `{domain: {memory: {guest: 64Mi}, devices: {interfaces: [{name: default, masquerade: {}}]}}, networks: [{name: default, pod: {vmIPv6NetworkCIDR: "fd20::/64"}}]}`, true, nil},
		{"an IPv6 masquerade network too small", `{domain: {memory: {guest: 64Mi}, devices: {interfaces: [{name: default, masquerade: {}}]}}, networks: [{name: default, pod: {vmIPv6NetworkCIDR: "fd20::/127"}}]}`, true,
			[]string{`spec.networks[0].pod.vmIPv6NetworkCIDR "fd20::/127": want an IPv6 network of /126 or larger`}},
		{"no memory", `{domain: {devices: {}}}`, true, []string{"no memory for the guest: set spec.domain.memory.guest"}},
		{"no memory, an instancetype sizes it", `{domain: {devices: {}}}`, false, nil},
		{"memory as a limit", `{domain: {resources: {limits: {memory: 1Gi}}}}`, true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var spec v1.VirtualMachineInstanceSpec
			if err := yaml.Unmarshal([]byte(tc.spec), &spec); err != nil {
				t.Fatal(err)
			}
			got := checkRunnable("spec", &spec, tc.needMemory)
			if len(got) != len(tc.want) {
				t.Fatalf("got %q, want %d messages like %q", got, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("message %d = %q, want it to contain %q", i, got[i], w)
				}
			}
		})
	}
}
