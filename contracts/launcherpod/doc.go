// Package launcherpod is the layout a VMI's launcher Pod shares with the
// node's handler: the annotation that opts a VMI in, the Pod's volumes and
// where they are mounted, and where the node keeps those volumes, so that
// the controller (which builds the Pod) and the handler (which prepares
// the VM's files in it) agree without importing each other.
package launcherpod
