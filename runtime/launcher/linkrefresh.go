package launcher

import (
	"fmt"
	"log/slog"
	"time"

	"libvirt.org/go/libvirt"
	"libvirt.org/go/libvirtxml"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/runtime/domain"
)

// linksToRefresh are the aliases of vmi's interfaces whose address changes
// with the Pod a migration lands in: the bridge binding on the pod network,
// which KubeVirt lets migrate by annotation (its LinkRefresh method).
func linksToRefresh(vmi *v1.VirtualMachineInstance) []string {
	if _, ok := vmi.Annotations[v1.AllowPodBridgeNetworkLiveMigrationAnnotation]; !ok {
		return nil
	}
	nics, err := domain.NICs(vmi)
	if err != nil {
		return nil
	}
	var out []string
	for _, n := range nics {
		if n.Network.Pod != nil && n.Bridge != nil {
			out = append(out, "ua-"+n.Name)
		}
	}
	return out
}

// linkDownFor is how long a refreshed link stays down: set up again at
// once, some guests miss both changes.
const linkDownFor = 100 * time.Millisecond

// refreshLinks sets each interface of aliases down and up again, so that
// the guest, seeing its carrier come back, asks DHCP for the address of
// the Pod it now runs in.
func refreshLinks(dom *libvirt.Domain, aliases []string, log *slog.Logger) error {
	if len(aliases) == 0 {
		return nil
	}
	xml, err := dom.GetXMLDesc(0)
	if err != nil {
		return fmt.Errorf("reading the domain: %w", err)
	}
	var d libvirtxml.Domain
	if err := d.Unmarshal(xml); err != nil {
		return fmt.Errorf("reading the domain: %w", err)
	}
	for _, alias := range aliases {
		iface := findInterface(&d, alias)
		if iface == nil {
			return fmt.Errorf("the domain has no interface %s", alias)
		}
		for _, state := range []string{"down", "up"} {
			iface.Link = &libvirtxml.DomainInterfaceLink{State: state}
			dev, err := iface.Marshal()
			if err != nil {
				return fmt.Errorf("encoding interface %s: %w", alias, err)
			}
			if err := dom.UpdateDeviceFlags(dev, libvirt.DOMAIN_DEVICE_MODIFY_LIVE); err != nil {
				return fmt.Errorf("setting the link of %s %s: %w", alias, state, err)
			}
			if state == "down" {
				time.Sleep(linkDownFor)
			}
		}
		log.Info("guest link refreshed after the migration", "interface", alias)
	}
	return nil
}

func findInterface(d *libvirtxml.Domain, alias string) *libvirtxml.DomainInterface {
	if d.Devices == nil {
		return nil
	}
	for i := range d.Devices.Interfaces {
		if a := d.Devices.Interfaces[i].Alias; a != nil && a.Name == alias {
			return &d.Devices.Interfaces[i]
		}
	}
	return nil
}
