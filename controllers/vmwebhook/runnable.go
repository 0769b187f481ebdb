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
// runtime cannot build, as KubeVirt's admission refuses it: an interface
// without its network or a network without its interface, two on the pod
// network, masquerade on a Multus network (only bridge binds a secondary
// one), a MAC that is not an
// Ethernet address, a masquerade network (vmNetworkCIDR) too small.
func checkInterfaces(prefix string, spec *v1.VirtualMachineInstanceSpec) []string {
	var msgs []string
	networks := map[string]v1.Network{}
	for _, n := range spec.Networks {
		networks[n.Name] = n
	}
	if n := len(spec.Domain.Devices.Interfaces); n > podnetwork.MaxInterfaces {
		msgs = append(msgs, fmt.Sprintf("%s.domain.devices.interfaces: %d interfaces; a guest gets at most %d", prefix, n, podnetwork.MaxInterfaces))
	}
	named := map[string]bool{}
	for i, iface := range spec.Domain.Devices.Interfaces {
		named[iface.Name] = true
		field := fmt.Sprintf("%s.domain.devices.interfaces[%d]", prefix, i)
		n, ok := networks[iface.Name]
		switch {
		case !ok:
			msgs = append(msgs, fmt.Sprintf("%s.name: no network named %q in %s.networks", field, iface.Name, prefix))
		case n.Multus != nil && iface.Bridge == nil:
			msgs = append(msgs, fmt.Sprintf("%s (%s): the Multus network %q takes the bridge binding only", field, iface.Name, n.Multus.NetworkName))
		}
		if hw, err := net.ParseMAC(iface.MacAddress); iface.MacAddress != "" && (err != nil || len(hw) != 6) {
			msgs = append(msgs, fmt.Sprintf("%s.macAddress: %q is not an Ethernet address", field, iface.MacAddress))
		}
	}
	return append(msgs, checkNetworks(prefix, spec.Networks, named)...)
}

// checkNetworks lists what of networks the runtime cannot build: one
// without an interface (named lists those with one), two pod networks,
// one both pod and Multus, a Multus network name that is none, a
// masquerade network (vmNetworkCIDR, vmIPv6NetworkCIDR) too small.
func checkNetworks(prefix string, networks []v1.Network, named map[string]bool) []string {
	var msgs []string
	pod := -1
	for i, n := range networks {
		field := fmt.Sprintf("%s.networks[%d]", prefix, i)
		if !named[n.Name] {
			msgs = append(msgs, fmt.Sprintf("%s.name: no interface named %q in %s.domain.devices.interfaces", field, n.Name, prefix))
		}
		switch {
		case n.Pod != nil && n.Multus != nil:
			msgs = append(msgs, fmt.Sprintf("%s (%s): pod and multus both given; a network is one of them", field, n.Name))
		case n.Pod != nil && pod >= 0:
			msgs = append(msgs, fmt.Sprintf("%s (%s): %s.networks[%d] is already the pod network; a VMI has one", field, n.Name, prefix, pod))
		case n.Pod != nil:
			pod = i
			if _, err := podnetwork.MasqueradeAddresses(n.Pod.VMNetworkCIDR); n.Pod.VMNetworkCIDR != "" && err != nil {
				msgs = append(msgs, fmt.Sprintf("%s.pod.%v", field, err))
			}
			if _, err := podnetwork.MasqueradeIPv6Addresses(n.Pod.VMIPv6NetworkCIDR); n.Pod.VMIPv6NetworkCIDR != "" && err != nil {
				msgs = append(msgs, fmt.Sprintf("%s.pod.%v", field, err))
			}
		case n.Multus != nil:
			if _, _, err := podnetwork.NetworkAttachment(n.Multus.NetworkName, "-"); err != nil {
				msgs = append(msgs, fmt.Sprintf("%s.multus.%v", field, err))
			}
		}
	}
	return msgs
}
