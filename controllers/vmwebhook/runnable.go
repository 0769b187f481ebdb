package vmwebhook

import (
	"fmt"
	"net"

	corev1 "k8s.io/api/core/v1"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/contracts/podnetwork"
)

// checkRunnable lists what in a VMI spec (at prefix; defaulted) the
// runtime could not build a domain of, as KubeVirt's admission refuses
// it: a disk without its volume, more interfaces than the runtime gives a
// guest, an interface without its network or a network without its
// interface, a MAC that is not an Ethernet address, a masquerade network
// (vmNetworkCIDR) the runtime cannot build, and, when the spec must size
// the guest itself (no instancetype), no memory at all.
func checkRunnable(prefix string, spec *v1.VirtualMachineInstanceSpec, needMemory bool) []string {
	var msgs []string
	volumes := map[string]bool{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = true
	}
	for i, d := range spec.Domain.Devices.Disks {
		if !volumes[d.Name] {
			msgs = append(msgs, fmt.Sprintf("%s.domain.devices.disks[%d].name: no volume named %q in %s.volumes", prefix, i, d.Name, prefix))
		}
	}
	msgs = append(msgs, checkInterfaces(prefix, spec)...)
	if needMemory && (spec.Domain.Memory == nil || spec.Domain.Memory.Guest == nil) &&
		spec.Domain.Resources.Requests.Memory().IsZero() && spec.Domain.Resources.Limits.Memory().IsZero() {
		msgs = append(msgs, fmt.Sprintf("no memory for the guest: set %[1]s.domain.memory.guest, %[1]s.domain.resources.requests.%[2]s or %[1]s.domain.resources.limits.%[2]s", prefix, corev1.ResourceMemory))
	}
	return msgs
}

// checkInterfaces lists what of the spec's interfaces and networks the
// runtime cannot build: more interfaces than it gives a guest, one without
// its network or a network without its interface, a MAC that is not an
// Ethernet address, a masquerade network (vmNetworkCIDR) too small.
func checkInterfaces(prefix string, spec *v1.VirtualMachineInstanceSpec) []string {
	var msgs []string
	ifaces := spec.Domain.Devices.Interfaces
	if len(ifaces) > 1 {
		msgs = append(msgs, fmt.Sprintf("%s.domain.devices.interfaces: %d interfaces given; one is supported", prefix, len(ifaces)))
	}
	networks := map[string]bool{}
	for _, n := range spec.Networks {
		networks[n.Name] = true
	}
	named := map[string]bool{}
	for i, iface := range ifaces {
		named[iface.Name] = true
		if !networks[iface.Name] {
			msgs = append(msgs, fmt.Sprintf("%s.domain.devices.interfaces[%d].name: no network named %q in %s.networks", prefix, i, iface.Name, prefix))
		}
		if hw, err := net.ParseMAC(iface.MacAddress); iface.MacAddress != "" && (err != nil || len(hw) != 6) {
			msgs = append(msgs, fmt.Sprintf("%s.domain.devices.interfaces[%d].macAddress: %q is not an Ethernet address", prefix, i, iface.MacAddress))
		}
	}
	for i, n := range spec.Networks {
		if !named[n.Name] {
			msgs = append(msgs, fmt.Sprintf("%s.networks[%d].name: no interface named %q in %s.domain.devices.interfaces", prefix, i, n.Name, prefix))
		}
		if n.Pod != nil && n.Pod.VMNetworkCIDR != "" {
			if _, err := podnetwork.MasqueradeAddresses(n.Pod.VMNetworkCIDR); err != nil {
				msgs = append(msgs, fmt.Sprintf("%s.networks[%d].pod.%v", prefix, i, err))
			}
		}
	}
	return msgs
}
