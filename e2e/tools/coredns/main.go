// Command coredns is CoreDNS with the plugins a cluster's DNS uses (those
// of the Corefile kubeadm and kind write, and template, which answers the
// names of a cluster without upstream), for the testbed's cluster DNS:
// built from CoreDNS's own module, without its cloud providers' plugins.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/hosts"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
	_ "github.com/coredns/coredns/plugin/template"
)

// The server type's directives (their order) are CoreDNS's; only the
// plugins imported above are built in.
var _ = dnsserver.Directives

func main() { coremain.Run() }
