package launcher

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"

	"github.com/tekvirt/tekvirt/contracts/podnetwork"
	"github.com/tekvirt/tekvirt/runtime/dhcp"
)

// resolvConf is the Pod's, which the kubelet wrote for its DNS policy.
const resolvConf = "/etc/resolv.conf"

// serveDHCP starts, for each guest interface with an address to hand out
// (on the pod network, or a Multus network whose IPAM gave the Pod one),
// the DHCP server that hands it its address, gateway and routes and its
// bridge's MTU; on the pod network also the Pod's DNS servers and search
// domains and the VMI's host name. It returns once the servers listen;
// they run until ctx ends.
func serveDHCP(ctx context.Context, spec *Spec, log *slog.Logger) error {
	for name, iface := range spec.Options.Interfaces {
		if !iface.Address.IsValid() {
			continue
		}
		mac, err := net.ParseMAC(iface.MAC)
		if err != nil {
			return fmt.Errorf("interface %s: %w", name, err)
		}
		bridge := cmp.Or(iface.Bridge, podnetwork.BridgeName)
		lease := &dhcp.Lease{
			Client: mac, Address: iface.Address, Gateway: iface.Gateway, Server: iface.Server, Routes: iface.Routes,
		}
		if !iface.Secondary {
			lease.Hostname = hostname(spec)
			if data, err := os.ReadFile(resolvConf); err == nil {
				lease.DNS, lease.Search = dhcp.ResolvConf(data)
			}
		}
		if br, err := net.InterfaceByName(bridge); err == nil {
			lease.MTU = br.MTU
		}
		ready := make(chan error, 2)
		go func() {
			err := lease.Serve(ctx, bridge, log.With("interface", name), func() { ready <- nil })
			if err != nil {
				log.Error("the DHCP server stopped", "interface", name, "err", err)
			}
			ready <- err
		}()
		if err := <-ready; err != nil {
			return fmt.Errorf("interface %s: %w", name, err)
		}
	}
	return nil
}

// hostname is the guest's, as KubeVirt gives it: spec.hostname, else the
// VMI's name.
func hostname(spec *Spec) string {
	if spec.VMI.Spec.Hostname != "" {
		return spec.VMI.Spec.Hostname
	}
	return spec.VMI.Name
}
