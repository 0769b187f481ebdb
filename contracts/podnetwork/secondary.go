package podnetwork

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Multus's annotations, as the launcher Pod carries them: NetworksAnnotation
// asks for the secondary networks (KubeVirt writes it), NetworkStatusAnnotation
// is what Multus attached (Multus writes it).
const (
	NetworksAnnotation      = "k8s.v1.cni.cncf.io/networks"
	NetworkStatusAnnotation = "k8s.v1.cni.cncf.io/network-status"
)

// secondaryPrefix and secondaryHashLen make KubeVirt's hashed name of a
// secondary network's interface in the Pod: "pod" and 11 hex digits, so
// that "k6t-" and the name still fit the kernel's 15 characters.
const (
	secondaryPrefix  = "pod"
	secondaryHashLen = 11
)

// SecondaryInterface is the Pod's interface for the VMI's network named
// network (spec.networks[].name) that Multus attaches: KubeVirt's hashed
// name, so that a Pod's network-status reads the same as KubeVirt's.
func SecondaryInterface(network string) string {
	sum := sha256.Sum256([]byte(network))
	return secondaryPrefix + hex.EncodeToString(sum[:])[:secondaryHashLen]
}

// SecondaryBridge and SecondaryTap are the bridge in the Pod that a
// secondary interface (SecondaryInterface) joins and the guest's tap on
// it: KubeVirt's names, "k6t-" and "tap" before the interface's hash.
func SecondaryBridge(podInterface string) string {
	return "k6t-" + strings.TrimPrefix(podInterface, secondaryPrefix)
}

// SecondaryTap is the guest's tap on a secondary interface's bridge: see
// SecondaryBridge.
func SecondaryTap(podInterface string) string {
	return "tap" + strings.TrimPrefix(podInterface, secondaryPrefix)
}

// NetworkAttachment is the namespace and name of the
// NetworkAttachmentDefinition a Multus network's networkName names, as
// Multus reads it: "name" in the VMI's namespace ns, or "namespace/name".
func NetworkAttachment(networkName, ns string) (string, string, error) {
	name := networkName
	if before, after, found := strings.Cut(networkName, "/"); found {
		ns, name = before, after
		if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
			return "", "", fmt.Errorf("networkName %q: namespace %q: %s", networkName, ns, strings.Join(msgs, ", "))
		}
	}
	if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		return "", "", fmt.Errorf("networkName %q: name %q: %s", networkName, name, strings.Join(msgs, ", "))
	}
	return ns, name, nil
}
