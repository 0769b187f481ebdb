// Command flanneld is flannel's daemon with the kube subnet manager and the
// VXLAN backend only, its rules in nftables: the pod network of tekvirt's
// hosted clusters, built from flannel's own module. (flannel's main package
// links every cloud backend, some of whose modules are not served here.)
// It runs on each hosted worker as the node: the node's spec.podCIDR is its
// lease, its public address the node's, announced in the node's
// annotations, and every other node's subnet is routed over VXLAN to that
// node's address.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/flannel-io/flannel/pkg/backend"
	_ "github.com/flannel-io/flannel/pkg/backend/vxlan"
	"github.com/flannel-io/flannel/pkg/ip"
	"github.com/flannel-io/flannel/pkg/ipmatch"
	"github.com/flannel-io/flannel/pkg/subnet/kube"
	"github.com/flannel-io/flannel/pkg/trafficmngr/nftables"
	"k8s.io/klog/v2"
)

func main() {
	kubeconfig := flag.String("kubeconfig-file", "", "kubeconfig of the node's credentials")
	netConf := flag.String("net-config-path", "/etc/kube-flannel/net-conf.json", "flannel's network configuration")
	iface := flag.String("iface", "eth0", "interface whose address the tunnel runs between")
	subnetFile := flag.String("subnet-file", "/run/flannel/subnet.env", "where the node's lease is written")
	ipMasq := flag.Bool("ip-masq", true, "masquerade traffic leaving the pod network")
	resync := flag.Int("resync", 5, "seconds between checks of the rules")
	klog.InitFlags(nil)
	flag.Parse()
	if err := run(*kubeconfig, *netConf, *iface, *subnetFile, *ipMasq, *resync); err != nil {
		klog.ErrorS(err, "flanneld")
		os.Exit(1)
	}
}

func run(kubeconfig, netConf, ifname, subnetFile string, ipMasq bool, resync int) error {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	sm, err := kube.NewSubnetManager(ctx, "", kubeconfig, "flannel.alpha.coreos.com", netConf, true)
	if err != nil {
		return fmt.Errorf("the kube subnet manager: %w", err)
	}
	config, err := sm.GetNetworkConfig(ctx)
	if err != nil {
		return fmt.Errorf("the network configuration %s: %w", netConf, err)
	}
	if config.BackendType != "vxlan" {
		return fmt.Errorf("backend %q: this flanneld has vxlan only", config.BackendType)
	}
	stack, err := ipmatch.GetIPFamily(config.EnableIPv4, config.EnableIPv6)
	if err != nil {
		return err
	}
	ext, err := ipmatch.LookupExtIface(ifname, "", "", stack, ipmatch.PublicIPOpts{})
	if err != nil {
		return fmt.Errorf("interface %s: %w", ifname, err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	be, err := backend.NewManager(ctx, sm, ext).GetBackend(config.BackendType)
	if err != nil {
		return err
	}
	bn, err := be.RegisterNetwork(ctx, &wg, config)
	if err != nil {
		return fmt.Errorf("registering the network: %w", err)
	}
	rules := &nftables.NFTablesManager{}
	if err := rules.Init(ctx); err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	if ipMasq {
		if err := rules.SetupAndEnsureMasqRules(ctx, config.Network, ip.IP4Net{}, ip.IP4Net{}, config.IPv6Network, ip.IP6Net{}, ip.IP6Net{}, bn.Lease(), resync); err != nil {
			return fmt.Errorf("masquerade rules: %w", err)
		}
	}
	rules.SetupAndEnsureForwardRules(ctx, config.Network, config.IPv6Network, resync)
	if err := sm.HandleSubnetFile(subnetFile, config, ipMasq, bn.Lease().Subnet, bn.Lease().IPv6Subnet, bn.MTU()); err != nil {
		return fmt.Errorf("writing %s: %w", subnetFile, err)
	}
	klog.InfoS("pod network up", "node subnet", bn.Lease().Subnet, "public address", ext.ExtAddr, "mtu", bn.MTU())
	wg.Add(1)
	go func() {
		defer wg.Done()
		bn.Run(ctx)
	}()
	if err := sm.CompleteLease(ctx, bn.Lease(), &wg); err != nil {
		return fmt.Errorf("completing the lease: %w", err)
	}
	<-ctx.Done()
	return nil
}
