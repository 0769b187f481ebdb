// Package agent speaks the QEMU guest agent protocol (QGA: JSON commands on
// a virtio-serial channel, exposed by QEMU as a unix socket): synchronize
// the stream, ping, and run a program in the guest with guest-exec and
// guest-exec-status.
package agent
