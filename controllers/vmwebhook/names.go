package vmwebhook

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/controllers/vmi"
)

// checkNames lists the volume, disk, interface, network and host device
// names of a VMI spec (at prefix) that are not DNS labels or are used twice
// in their list, as KubeVirt rejects them, and host devices that are not
// extended resources. The runtime names devices and files after them, so a
// name like "x/../../tmp/y" must never get past admission.
func checkNames(prefix string, spec *v1.VirtualMachineInstanceSpec) []string {
	var msgs []string
	check := func(list string, names []string) {
		seen := map[string]bool{}
		for i, n := range names {
			field := fmt.Sprintf("%s.%s[%d].name", prefix, list, i)
			if errs := validation.IsDNS1123Label(n); len(errs) > 0 {
				msgs = append(msgs, fmt.Sprintf("%s %q is not a valid name: %s", field, n, strings.Join(errs, ", ")))
			} else if seen[n] {
				msgs = append(msgs, fmt.Sprintf("%s %q is used twice", field, n))
			}
			seen[n] = true
		}
	}
	var names []string
	for _, v := range spec.Volumes {
		names = append(names, v.Name)
	}
	check("volumes", names)
	names = nil
	for _, d := range spec.Domain.Devices.Disks {
		names = append(names, d.Name)
	}
	check("domain.devices.disks", names)
	names = nil
	for _, i := range spec.Domain.Devices.Interfaces {
		names = append(names, i.Name)
	}
	check("domain.devices.interfaces", names)
	names = nil
	for _, n := range spec.Networks {
		names = append(names, n.Name)
	}
	check("networks", names)
	names = nil
	for i, d := range spec.Domain.Devices.HostDevices {
		names = append(names, d.Name)
		if err := vmi.ExtendedResource(d.DeviceName); err != nil {
			msgs = append(msgs, fmt.Sprintf("%s.domain.devices.hostDevices[%d].deviceName: %v", prefix, i, err))
		}
	}
	check("domain.devices.hostDevices", names)
	return msgs
}
