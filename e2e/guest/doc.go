// Package guest builds the small Linux guest tekvirt's VM tests boot: the
// Debian kernel, its virtio and ext4 modules, a static busybox and Debian's
// qemu-guest-agent with the libraries it links, packed into an initramfs
// whose init starts the agent and a shell on the serial console. Everything
// comes from Debian packages (apt-get download); nothing else is fetched.
package guest
