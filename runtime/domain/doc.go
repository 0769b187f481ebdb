// Package domain turns a KubeVirt VirtualMachineInstance into a libvirt
// domain definition. Each concern (machine, CPU and memory, boot, disks,
// network, channels) is a small pure configurator with its own golden XML
// test under testdata/. Anything the VMI asks for that no configurator can
// express is an error naming the field, never dropped.
package domain
