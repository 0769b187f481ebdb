package cluster

import (
	"context"
	"fmt"
	"net"
	"strconv"

	ctrlconfig "github.com/tekvirt/tekvirt/controllers/config"
)

// The local registry on the cluster network: Pods, guests and the
// resolvers pull from RegistryClusterAddr (kube-system's Service
// "registry", whose endpoint is the registry's listener on the node
// address); the host pushes there too (kube-proxy routes Service
// addresses on the host as in Pods), anyone else is refused a push.
// Nodes pull both names through RegistryAddr.
const (
	RegistryClusterIP   = "10.96.0.11"
	RegistryClusterAddr = RegistryClusterIP + ":5000"
	registryPort        = 5000
)

// registryNodeAddr is where the registry serves the cluster network.
func (c *Cluster) registryNodeAddr() string {
	return net.JoinHostPort(c.NodeIP.String(), strconv.Itoa(registryPort))
}

// registryManifest is the registry's Service and endpoint, and the
// ConfigMap that tells tools where it is (KEP-1755's, as kind writes it):
// host is the name images pushed from this machine carry (the release's,
// which the nodes pull through their loopback), hostFromClusterNetwork
// where Pods and guests reach it.
func (c *Cluster) registryManifest() string {
	return fmt.Sprintf(`apiVersion: v1
kind: Service
metadata:
  name: registry
  namespace: kube-system
spec:
  clusterIP: %[1]s
  ports:
  - {name: registry, port: %[3]d, targetPort: %[3]d, protocol: TCP}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: registry
  namespace: kube-system
  labels: {kubernetes.io/service-name: registry}
addressType: IPv4
endpoints:
- addresses: [%[2]q]
ports:
- {name: registry, port: %[3]d, protocol: TCP}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: local-registry-hosting
  namespace: kube-public
data:
  localRegistryHosting.v1: |
    host: %[4]q
    hostFromClusterNetwork: %[5]q
    hostFromContainerRuntime: %[4]q
    help: "push from this machine; Pods and guests pull from %[5]s, the nodes from both"
`, RegistryClusterIP, c.NodeIP.String(), registryPort, RegistryAddr, RegistryClusterAddr)
}

// installRegistryService makes the registry reachable at
// RegistryClusterAddr.
func (c *Cluster) installRegistryService(ctx context.Context, a *applier) error {
	objs, err := ctrlconfig.Decode([]byte(c.registryManifest()))
	if err != nil {
		return fmt.Errorf("decoding the registry's Service: %w", err)
	}
	if err := a.apply(ctx, objs); err != nil {
		return fmt.Errorf("the registry's Service: %w", err)
	}
	return nil
}
