// Package runtime is to hold the node side of tekvirt: a handler per node
// that watches the VMIs placed on it and one launcher per VM owning a
// libvirt domain. It is empty until the VM runtime work lands; the layering
// test already keeps Tekton out of it.
package runtime
