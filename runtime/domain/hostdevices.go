package domain

import (
	"fmt"
	"strconv"
	"strings"

	"libvirt.org/go/libvirtxml"

	v1 "kubevirt.io/api/core/v1"
)

// pciResourcePrefix starts the variable a PCI device plugin sets in the
// container it allocated devices to, KubeVirt's convention.
const pciResourcePrefix = "PCI_RESOURCE_"

// PCIResourceEnv is the variable that holds the PCI addresses (comma
// separated, "0000:81:00.0") a device plugin allocated of resource to the
// container: PCI_RESOURCE_ and the name in upper case, "/" and "." as "_"
// (nvidia.com/A100 -> PCI_RESOURCE_NVIDIA_COM_A100).
func PCIResourceEnv(resource string) string {
	return pciResourcePrefix + strings.NewReplacer("/", "_", ".", "_").Replace(strings.ToUpper(resource))
}

// PCIDevicesFromEnv reads, for each resource the VMI's host devices name,
// the addresses its device plugin allocated, from getenv (the launcher's
// environment). Resources with none are left out.
func PCIDevicesFromEnv(vmi *v1.VirtualMachineInstance, getenv func(string) string) map[string][]string {
	out := map[string][]string{}
	for _, hd := range vmi.Spec.Domain.Devices.HostDevices {
		if _, done := out[hd.DeviceName]; done {
			continue
		}
		var addrs []string
		for _, a := range strings.Split(getenv(PCIResourceEnv(hd.DeviceName)), ",") {
			if a = strings.TrimSpace(a); a != "" {
				addrs = append(addrs, a)
			}
		}
		if len(addrs) > 0 {
			out[hd.DeviceName] = addrs
		}
	}
	return out
}

// ConfigureHostDevices passes each of spec.domain.devices.hostDevices
// through: the next PCI address allocated of its resource
// (opts.PCIDevices) becomes a <hostdev>. The device plugin has bound the
// device to vfio-pci already, so libvirt does not manage it.
func ConfigureHostDevices(vmi *v1.VirtualMachineInstance, opts *Options, d *libvirtxml.Domain) error {
	next := map[string]int{}
	var errs []string
	for i, hd := range vmi.Spec.Domain.Devices.HostDevices {
		field := fmt.Sprintf("spec.domain.devices.hostDevices[%d] (%s)", i, hd.Name)
		addrs := opts.PCIDevices[hd.DeviceName]
		n := next[hd.DeviceName]
		if n >= len(addrs) {
			errs = append(errs, fmt.Sprintf("%s: no PCI device of %s left for it: %d allocated to the launcher (%s); a device plugin must advertise %s and set that variable",
				field, hd.DeviceName, len(addrs), PCIResourceEnv(hd.DeviceName), hd.DeviceName))
			continue
		}
		next[hd.DeviceName] = n + 1
		addr, err := pciAddress(addrs[n])
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %s: %v", field, PCIResourceEnv(hd.DeviceName), err))
			continue
		}
		d.Devices.Hostdevs = append(d.Devices.Hostdevs, libvirtxml.DomainHostdev{
			Managed:   "no",
			SubsysPCI: &libvirtxml.DomainHostdevSubsysPCI{Source: &libvirtxml.DomainHostdevSubsysPCISource{Address: addr}},
			Alias:     &libvirtxml.DomainAlias{Name: "ua-hostdevice-" + hd.Name},
		})
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// pciAddress parses a PCI address as sysfs writes it,
// domain:bus:slot.function in hex ("0000:81:00.1").
func pciAddress(s string) (*libvirtxml.DomainAddressPCI, error) {
	bad := fmt.Errorf("PCI address %q is not domain:bus:slot.function", s)
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return nil, bad
	}
	slotFn := strings.Split(parts[2], ".")
	if len(slotFn) != 2 {
		return nil, bad
	}
	fields := []struct {
		text string
		bits int
	}{{parts[0], 16}, {parts[1], 8}, {slotFn[0], 5}, {slotFn[1], 3}}
	var vals [4]uint
	for i, f := range fields {
		v, err := strconv.ParseUint(f.text, 16, f.bits)
		if err != nil || f.text == "" {
			return nil, bad
		}
		vals[i] = uint(v)
	}
	return &libvirtxml.DomainAddressPCI{Domain: &vals[0], Bus: &vals[1], Slot: &vals[2], Function: &vals[3]}, nil
}
