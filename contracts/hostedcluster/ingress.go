package hostedcluster

// The hosted cluster's default ingress, named as OpenShift's ingress
// operator names the default IngressController's router when it publishes
// it with the NodePortService strategy (the way HyperShift's KubeVirt
// platform reaches it): the hosted-cluster-bootstrap task makes it, the
// router serves it and the infrastructure's passthrough Service forwards
// to its node ports.
const (
	RouterNamespace  = "openshift-ingress"
	RouterDeployment = "router-default"
	RouterService    = "router-nodeport-default"
	// RouterCertsSecret holds the certificate the router serves for hosts
	// no Ingress gives one to (kubernetes.io/tls); the router makes a
	// self-signed one for the ingress domain when it is absent.
	RouterCertsSecret = "router-certs-default"
	// IngressClass is the class of the Ingresses the router serves (and
	// of those naming none: it is the cluster's default class), with
	// OpenShift's name and controller.
	IngressClass      = "openshift-default"
	IngressController = "openshift.io/ingress-to-route"
	// The router Service's ports, by name, and the container ports behind
	// them (the router runs as non-root).
	RouterHTTPPortName  = "http"
	RouterHTTPSPortName = "https"
	RouterHTTPPort      = 8080
	RouterHTTPSPort     = 8443
	RouterHealthPort    = 1936
)

// DefaultBaseDomain is the base domain of a HostedCluster that names none
// (spec.dns.baseDomain ""; the API lets the platform choose): HyperShift
// takes the infrastructure's own ingress domain then, which a bare
// Kubernetes cluster does not have, so a name of the private-use TLD.
const DefaultBaseDomain = "internal"

// IngressDomain is the default ingress's domain of hosted cluster name
// under baseDomain (its spec.dns.baseDomain), as HyperShift names it: the
// router serves *.apps.<name>.<baseDomain>.
func IngressDomain(name, baseDomain string) string {
	if baseDomain == "" {
		baseDomain = DefaultBaseDomain
	}
	return "apps." + name + "." + baseDomain
}
