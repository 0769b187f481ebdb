// Package podnetwork is how a VMI's interface on the pod network is laid
// out in its launcher Pod: the names and addresses the handler builds in
// the Pod's network namespace, the launcher's DHCP server hands to the
// guest and the domain's interface uses, and the device plugin resource
// that gives the launcher /dev/net/tun. The controller, the handler and
// the launcher agree on them here without importing each other.
package podnetwork
