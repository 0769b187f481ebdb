package launcher

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
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
// domains and the VMI's host name; and a DHCPv6 server for masquerade's
// IPv6 address. It returns once the servers listen; they run until ctx
// ends.
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
		if err := startServer(name, "DHCP", log, func(ready func()) error {
			return lease.Serve(ctx, bridge, log.With("interface", name), ready)
		}); err != nil {
			return err
		}
		if iface.Address6.IsValid() {
			if err := serveDHCPv6(ctx, name, bridge, iface.Address6, lease, log); err != nil {
				return err
			}
		}
	}
	return nil
}

// serveDHCPv6 starts masquerade's DHCPv6 server on bridge, as KubeVirt's
// launcher runs one: the guest's IPv6 address and v4's DNS lease's IPv6
// servers and search domains.
func serveDHCPv6(ctx context.Context, name, bridge string, addr netip.Addr, v4 *dhcp.Lease, log *slog.Logger) error {
	br, err := net.InterfaceByName(bridge)
	if err != nil {
		return fmt.Errorf("interface %s: %w", name, err)
	}
	lease := &dhcp.Lease6{Address: addr, ServerMAC: br.HardwareAddr, DNS: v4.DNS, Search: v4.Search}
	return startServer(name, "DHCPv6", log, func(ready func()) error {
		return lease.Serve6(ctx, bridge, log.With("interface", name), ready)
	})
}

// startServer runs serve in the background and returns once it listens
// (it calls ready) or has failed; a later failure is logged.
func startServer(name, what string, log *slog.Logger, serve func(ready func()) error) error {
	ready := make(chan error, 2)
	go func() {
		err := serve(func() { ready <- nil })
		if err != nil {
			log.Error("the "+what+" server stopped", "interface", name, "err", err)
		}
		ready <- err
	}()
	if err := <-ready; err != nil {
		return fmt.Errorf("interface %s: %w", name, err)
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
