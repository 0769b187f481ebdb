package domain

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"libvirt.org/go/libvirtxml"

	v1 "kubevirt.io/api/core/v1"
)

// ConfigureCPUAndMemory sets the vCPU topology (spec.domain.cpu; each of
// sockets, cores and threads defaults to 1) and the guest memory
// (spec.domain.memory.guest, else spec.domain.resources.requests.memory).
func ConfigureCPUAndMemory(vmi *v1.VirtualMachineInstance, _ *Options, d *libvirtxml.Domain) error {
	sockets, cores, threads := uint32(1), uint32(1), uint32(1)
	if c := vmi.Spec.Domain.CPU; c != nil {
		sockets, cores, threads = orOne(c.Sockets), orOne(c.Cores), orOne(c.Threads)
	}
	d.VCPU = &libvirtxml.DomainVCPU{Placement: "static", Value: uint(sockets * cores * threads)}
	d.CPU = &libvirtxml.DomainCPU{Topology: &libvirtxml.DomainCPUTopology{
		Sockets: int(sockets), Dies: 1, Cores: int(cores), Threads: int(threads),
	}}
	mem := vmi.Spec.Domain.Resources.Requests[corev1.ResourceMemory]
	if m := vmi.Spec.Domain.Memory; m != nil && m.Guest != nil {
		mem = *m.Guest
	}
	bytes := mem.Value()
	if bytes <= 0 {
		return fmt.Errorf("spec.domain.memory.guest or spec.domain.resources.requests.memory must give the guest memory")
	}
	// libvirt counts whole KiB; round up so the guest gets at least what it asked.
	kib := uint((bytes + 1023) / 1024)
	d.Memory = &libvirtxml.DomainMemory{Value: kib, Unit: "KiB"}
	return nil
}

func orOne(v uint32) uint32 {
	if v == 0 {
		return 1
	}
	return v
}
