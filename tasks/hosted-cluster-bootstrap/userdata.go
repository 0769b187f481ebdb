package hostedclusterbootstrap

import (
	"fmt"
	"net/netip"
	"strings"
)

// VXLANPort is the UDP port of the hosted clusters' pod network tunnel:
// not flannel's default (8472) nor Linux's (4789), so that it cannot meet
// a VXLAN the infrastructure runs (HyperShift moves Geneve off its default
// for the same reason).
const VXLANPort = 9880

// Worker is what a worker's user-data hands it.
type Worker struct {
	Server     string // the hosted API server's URL
	CA         []byte // its CA (PEM)
	Token      string // the bootstrap token
	PullSecret []byte // a docker config JSON, or nil
	// ClusterCIDR is the pod network (flannel's Network); ServiceCIDR the
	// Services' (the cluster DNS has its tenth address, as kubeadm's).
	ClusterCIDR, ServiceCIDR string
	// Registries are served over plain HTTP: the infrastructure's local
	// registry (KEP-1755's), by the names images carry.
	Registries []Registry
}

// Registry is a plain-HTTP registry a worker pulls images named Name from,
// at Endpoint (host[:port]; Name's when empty).
type Registry struct{ Name, Endpoint string }

// hostPort reports whether s is a registry's host[:port] and nothing else.
func hostPort(s string) bool {
	return s != "" && !strings.ContainsAny(s, " /'\"\n\\$`")
}

// ClusterDNS is the cluster DNS Service's address in serviceCIDR: its
// tenth, as kubeadm and HyperShift give it.
func ClusterDNS(serviceCIDR string) (netip.Addr, error) {
	p, err := netip.ParsePrefix(serviceCIDR)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("serviceCIDR %q: %w", serviceCIDR, err)
	}
	a := p.Masked().Addr()
	for range 10 {
		a = a.Next()
	}
	if !p.Contains(a) {
		return netip.Addr{}, fmt.Errorf("serviceCIDR %q is too small for the cluster DNS address", serviceCIDR)
	}
	return a, nil
}

// UserData is the worker's "#!" user-data: it writes the hosted cluster's
// CA and the kubelet's bootstrap kubeconfig, which the worker image's init
// hands to kubelet, the pull secret (when given) where kubelet looks for
// registry credentials (its root directory), the kubelet's cluster DNS,
// flannel's network configuration (VXLAN on VXLANPort) and containerd's
// hosts of the plain-HTTP registries.
func UserData(w Worker) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, `#!/bin/sh
set -e
mkdir -p /etc/kubernetes/pki
cat > /etc/kubernetes/pki/ca.crt <<'END'
%s
END
umask 077
cat > /etc/kubernetes/bootstrap-kubelet.conf <<'END'
apiVersion: v1
kind: Config
clusters: [{name: hosted, cluster: {server: "%s", certificate-authority: /etc/kubernetes/pki/ca.crt}}]
users: [{name: bootstrap, user: {token: "%s"}}]
contexts: [{name: hosted, context: {cluster: hosted, user: bootstrap}}]
current-context: hosted
END
umask 022
`, strings.TrimSpace(string(w.CA)), w.Server, w.Token)
	if len(w.PullSecret) > 0 {
		// A here-document ends at a line "END" alone: JSON has none.
		fmt.Fprintf(&b, "mkdir -p /var/lib/kubelet\n(umask 077; cat > /var/lib/kubelet/config.json <<'END'\n%s\nEND\n)\n", strings.TrimSpace(string(w.PullSecret)))
	}
	if w.ServiceCIDR != "" {
		dns, err := ClusterDNS(w.ServiceCIDR)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "cat >> /etc/kubernetes/kubelet.yaml <<'END'\nclusterDNS: [%s]\nclusterDomain: cluster.local\nEND\n", dns)
	}
	if w.ClusterCIDR != "" {
		if _, err := netip.ParsePrefix(w.ClusterCIDR); err != nil {
			return "", fmt.Errorf("clusterCIDR %q: %w", w.ClusterCIDR, err)
		}
		fmt.Fprintf(&b, "mkdir -p /etc/kube-flannel\ncat > /etc/kube-flannel/net-conf.json <<'END'\n"+
			`{"Network": %q, "EnableNFTables": true, "Backend": {"Type": "vxlan", "Port": %d}}`+"\nEND\n", w.ClusterCIDR, VXLANPort)
	}
	for _, r := range w.Registries {
		endpoint := r.Endpoint
		if endpoint == "" {
			endpoint = r.Name
		}
		if !hostPort(r.Name) || !hostPort(endpoint) {
			return "", fmt.Errorf("registry %q at %q is not a host[:port]", r.Name, r.Endpoint)
		}
		fmt.Fprintf(&b, "mkdir -p '/etc/containerd/certs.d/%[1]s'\ncat > '/etc/containerd/certs.d/%[1]s/hosts.toml' <<'END'\n"+
			"server = \"http://%[2]s\"\n[host.\"http://%[2]s\"]\n  capabilities = [\"pull\", \"resolve\"]\nEND\n", r.Name, endpoint)
	}
	return b.String(), nil
}
