// Package migration carries a live migration's streams between the
// launcher Pods of its source and its target, as KubeVirt's migration
// proxy does: libvirt's connection from the source Pod's libvirtd to the
// target Pod's, QEMU's memory stream, and the block migration (NBD) of the
// VM's local disks. Inside each Pod a stream is a TCP connection on the
// Pod's loopback, which neither the guest nor the Pod network reaches;
// between the nodes the two handlers carry it over mutual TLS with the
// handlers' certificate, so nothing listens on a tenant's Pod network and
// only a handler can reach a migration. The source handler listens on the
// source Pod's loopback (ListenSource); the target handler's Server
// accepts the streams of the migrations it expects (Expect) and connects
// each to the same port on the target Pod's loopback.
package migration
