// Package podnet builds a VMI's network binding inside its launcher Pod's
// network namespace, as KubeVirt's virt-handler does in its first phase:
// the handler, privileged, enters the namespace from outside and makes the
// tap QEMU will open (owned by the launcher's user), the bridge the tap
// joins, the addresses and the nftables rules; the launcher and QEMU stay
// unprivileged. Everything lives in the Pod's namespace, so it goes when
// the Pod goes: nothing is left on the node. Listen and Dial open sockets
// there, on the Pod's loopback, for what the handler carries to and from
// a launcher (a live migration's streams).
package podnet
