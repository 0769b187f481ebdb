// Package dhcp is the DHCPv4 server a launcher runs for its guest: it
// hands the one client it serves (by MAC) the address, gateway, DNS
// servers and search domains of its binding, with an infinite lease, as
// KubeVirt's launcher does. It is not a general DHCP server: no pools, no
// relays, nothing kept.
package dhcp
