package hostedcluster

// Konnectivity, as HyperShift runs it: the hosted API server sits in the
// infrastructure cluster, where the hosted cluster's Pod and Service
// addresses mean nothing, so everything it dials in the hosted cluster
// (kubelets for logs, exec and port-forward; admission and conversion
// webhooks; aggregated API servers; pods/proxy and services/proxy) goes
// through a tunnel. A proxy server runs beside each API server replica
// (kube-apiserver's egress selector "cluster" points at its Unix socket);
// an agent on every worker (a hostNetwork DaemonSet in the hosted
// kube-system) dials the proxy server's agent port and carries the
// connections from there.
const (
	// KonnectivityCAKey in the PKI Secret signs the proxy server's agent
	// listener and the agents' client certificate; nothing else trusts it,
	// so the agents' certificate opens the tunnel and nothing more.
	KonnectivityCAKey = "konnectivity-ca"
	// KonnectivityAgentClient in the PKI Secret is the agents' client
	// certificate.
	KonnectivityAgentClient = "konnectivity-agent"
	// KonnectivityServerSecret in the control-plane namespace
	// (kubernetes.io/tls) is the proxy server's certificate for agents:
	// the Service's names and ClusterIP.
	KonnectivityServerSecret = "konnectivity-server"
	// KonnectivityService (in the control-plane namespace) publishes the
	// proxy servers' agent port; workers reach its ClusterIP.
	KonnectivityService   = "konnectivity-server"
	KonnectivityAgentPort = 8091
	// KonnectivityAgent names the agents' DaemonSet and the Secret of
	// their certificate (CA, tls.crt, tls.key) in the hosted kube-system.
	KonnectivityAgent = "konnectivity-agent"
)
