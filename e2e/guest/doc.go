// Package guest builds the small Linux guest tekvirt's VM tests boot: the
// Debian kernel, its virtio and ext4 modules, a static busybox and Debian's
// qemu-guest-agent with the libraries it links, packed into an initramfs
// whose init takes its host name, SSH keys and static addresses from a
// NoCloud seed (network-config version 2, read by network-config.awk),
// gets IPv4 by DHCP, and starts dropbear, the agent and a shell on the
// serial console. Everything
// comes from Debian packages (apt-get download); nothing else is fetched.
package guest
