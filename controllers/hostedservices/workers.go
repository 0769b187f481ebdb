package hostedservices

import (
	"net/netip"
	"sort"

	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// Worker is one worker VM as the infrastructure's Services reach it.
type Worker struct {
	// Name is the VMI's, which is also its hosted Node's.
	Name string
	// Address is the worker's IPv4 address on the pod network (its
	// launcher Pod's, which the bridge binding gives the guest).
	Address string
	// InfraNode is the infrastructure node the VMI runs on.
	InfraNode string
	// Ready: the VMI runs and its hosted Node is Ready.
	Ready bool
}

// Workers are the workers among vmis that have an address on the pod
// network, sorted by name; nodes are the hosted cluster's Nodes by name.
// The address is the one the VMI's status gives its pod-network interface
// (the handler writes it from the launcher Pod), so that a hosted Node's
// addresses, which the hosted cluster's admin can set, never decide where
// the infrastructure sends traffic.
func Workers(vmis []kubevirtv1.VirtualMachineInstance, nodes map[string]*corev1.Node) []Worker {
	var out []Worker
	for i := range vmis {
		vmi := &vmis[i]
		addr := podNetworkAddress(vmi)
		if addr == "" {
			continue
		}
		out = append(out, Worker{
			Name: vmi.Name, Address: addr, InfraNode: vmi.Status.NodeName,
			Ready: vmi.Status.Phase == kubevirtv1.Running && vmi.DeletionTimestamp.IsZero() && nodeReady(nodes[vmi.Name]),
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// podNetworkAddress is the IPv4 address of vmi's interface on the pod
// network, or "".
func podNetworkAddress(vmi *kubevirtv1.VirtualMachineInstance) string {
	pod := ""
	for _, n := range vmi.Spec.Networks {
		if n.Pod != nil {
			pod = n.Name
		}
	}
	if pod == "" {
		return ""
	}
	for _, ni := range vmi.Status.Interfaces {
		if ni.Name != pod {
			continue
		}
		for _, ip := range append([]string{ni.IP}, ni.IPs...) {
			if a, err := netip.ParseAddr(ip); err == nil && a.Is4() {
				return a.String()
			}
		}
	}
	return ""
}

func nodeReady(n *corev1.Node) bool {
	if n == nil {
		return false
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
