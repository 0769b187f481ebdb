package hostedclustercontrolplane

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hc "github.com/tekvirt/tekvirt/contracts/hostedcluster"
	"github.com/tekvirt/tekvirt/contracts/pki"
	"github.com/tekvirt/tekvirt/tasks/hostedcp"
)

// FieldOwner is the task's server-side apply owner.
const FieldOwner = "hosted-cluster-control-plane"

const servingLife = 365 * 24 * time.Hour

// Params are the task's params.
type Params struct {
	Namespace   string
	Image       string
	Replicas    int
	ServiceCIDR string
	ClusterCIDR string
	ServiceType string
}

// Result is where the API server is.
type Result struct{ Address string }

// Map is the task's results.
func (r Result) Map() map[string]string { return map[string]string{"apiServerAddress": r.Address} }

func (p Params) check() (corev1.ServiceType, error) {
	switch {
	case p.Namespace == "":
		return "", fmt.Errorf("controlPlaneNamespace is required")
	case p.Image == "":
		return "", fmt.Errorf("releaseImage is required")
	case p.Replicas < 1:
		return "", fmt.Errorf("replicas: %d; want at least 1", p.Replicas)
	}
	for name, cidr := range map[string]string{"serviceCIDR": p.ServiceCIDR, "clusterCIDR": p.ClusterCIDR} {
		if _, err := netip.ParsePrefix(cidr); err != nil {
			return "", fmt.Errorf("%s %q: %w", name, cidr, err)
		}
	}
	typ := corev1.ServiceType(p.ServiceType)
	if !slices.Contains([]corev1.ServiceType{corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer}, typ) {
		return "", fmt.Errorf("apiServerServiceType %q: want ClusterIP, NodePort or LoadBalancer", p.ServiceType)
	}
	return typ, nil
}

// FirstServiceIP is the hosted cluster's own "kubernetes" Service address:
// the first address of its service network.
func FirstServiceIP(cidr string) (net.IP, error) {
	pfx, err := netip.ParsePrefix(cidr)
	if err != nil {
		return nil, err
	}
	return net.IP(pfx.Masked().Addr().Next().AsSlice()), nil
}

// ServingRequest is the API server's certificate: the Service's names and
// addresses (inside the infrastructure cluster and, as "kubernetes", inside
// the hosted one) and any load balancer address.
func ServingRequest(ns string, ips []net.IP) pki.Request {
	var names []string
	for _, base := range []string{hc.APIServerService + "." + ns, "kubernetes.default"} {
		names = append(names, base, base+".svc", base+".svc.cluster.local")
	}
	names = append([]string{hc.APIServerService, "kubernetes", "localhost"}, names...)
	return pki.Request{CommonName: hc.APIServerService, DNSNames: names, IPs: slices.Concat(ips, []net.IP{net.IPv4(127, 0, 0, 1)}),
		Usage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, Lifetime: servingLife}
}

// TokenFile is the API server's static token file: the kubeadmin password
// is the bearer token of user kubeadmin in system:masters (cluster-admin).
func TokenFile(password string) []byte {
	return fmt.Appendf(nil, "%s,%s,%s,\"system:masters\"\n", password, hc.KubeadminUser, hc.KubeadminUser)
}

// Run makes the control plane in p.Namespace; hosted-cluster-wait waits for it.
func Run(ctx context.Context, c client.Client, p Params, out io.Writer) (Result, error) {
	typ, err := p.check()
	if err != nil {
		return Result{}, err
	}
	ns := p.Namespace
	if err := hostedcp.Apply(ctx, c, FieldOwner, APIServerService(ns, typ), KonnectivityService(ns), egressSelectorConfigMap(ns)); err != nil {
		return Result{}, err
	}
	konnIP, err := hostedcp.ServiceIP(ctx, c, ns, hc.KonnectivityService)
	if err != nil {
		return Result{}, err
	}
	svc := &corev1.Service{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: hc.APIServerService}, svc); err != nil {
		return Result{}, fmt.Errorf("reading Service %s/%s: %w", ns, hc.APIServerService, err)
	}
	clusterIP := net.ParseIP(svc.Spec.ClusterIP)
	if clusterIP == nil {
		return Result{}, fmt.Errorf("service %s/%s has no cluster IP", ns, hc.APIServerService)
	}
	hostedIP, err := FirstServiceIP(p.ServiceCIDR)
	if err != nil {
		return Result{}, err
	}
	ips := []net.IP{clusterIP, hostedIP}
	for _, in := range svc.Status.LoadBalancer.Ingress {
		if ip := net.ParseIP(in.IP); ip != nil {
			ips = append(ips, ip)
		}
	}
	etcdIP, err := hostedcp.ServiceIP(ctx, c, ns, hc.EtcdClientService)
	if err != nil {
		return Result{}, fmt.Errorf("%w (run hosted-cluster-etcd first)", err)
	}
	store, err := hostedcp.LoadPKI(ctx, c, ns)
	if err != nil {
		return Result{}, err
	}
	password, err := hostedcp.Password(ctx, c, ns)
	if err != nil {
		return Result{}, err
	}
	secrets, err := configSecrets(ctx, c, store, ns, ips, konnIP, password, out)
	if err != nil {
		return Result{}, err
	}
	if err := hostedcp.Apply(ctx, c, FieldOwner, secrets...); err != nil {
		return Result{}, err
	}
	cl := Cluster{Namespace: ns, Image: p.Image, Replicas: int32(p.Replicas), ServiceCIDR: p.ServiceCIDR, ClusterCIDR: p.ClusterCIDR,
		AdvertiseIP: clusterIP.String(), EtcdEndpoint: "https://" + net.JoinHostPort(etcdIP.String(), fmt.Sprint(hc.EtcdClientPort)),
		Hash: hash(store.Data, secrets)}
	if err := hostedcp.Apply(ctx, c, FieldOwner, APIServer(cl), ControllerManager(cl), Scheduler(cl)); err != nil {
		return Result{}, err
	}
	fmt.Fprintf(out, "Deployments %s, %s and %s applied in %s (%d replicas each)\n", hc.APIServerDeployment, hc.ControllerManagerDeployment, hc.SchedulerDeployment, ns, p.Replicas)
	return Result{Address: hostedcp.APIServerURL(clusterIP.String())}, nil
}

// configSecrets are the serving certificates of the API server and of
// its Konnectivity proxy server (kept while current), the token file and
// the kubeconfigs of the controller manager, the scheduler and the local
// admin.
func configSecrets(ctx context.Context, c client.Client, store *hostedcp.PKI, ns string, ips []net.IP, konnIP net.IP, password string, out io.Writer) ([]client.Object, error) {
	ca, err := store.Pair(hc.CAKey)
	if err != nil {
		return nil, err
	}
	kp, issued, err := hostedcp.ServingCert(ctx, c, ns, ServingSecret, ca, ServingRequest(ns, ips))
	if err != nil {
		return nil, err
	}
	if issued {
		fmt.Fprintf(out, "Secret %s/%s: issued for %v\n", ns, ServingSecret, ips)
	}
	konnCA, err := store.Pair(hc.KonnectivityCAKey)
	if err != nil {
		return nil, err
	}
	konn, issued, err := hostedcp.ServingCert(ctx, c, ns, hc.KonnectivityServerSecret, konnCA, KonnectivityServingRequest(ns, konnIP))
	if err != nil {
		return nil, err
	}
	if issued {
		fmt.Fprintf(out, "Secret %s/%s: issued for %s\n", ns, hc.KonnectivityServerSecret, konnIP)
	}
	server := hostedcp.APIServerURL(ips[0].String())
	objs := []client.Object{
		secret(ns, ServingSecret, map[string][]byte{corev1.TLSCertKey: kp.CertPEM, corev1.TLSPrivateKeyKey: kp.KeyPEM}),
		secret(ns, hc.KonnectivityServerSecret, map[string][]byte{corev1.TLSCertKey: konn.CertPEM, corev1.TLSPrivateKeyKey: konn.KeyPEM}),
		secret(ns, TokensSecret, map[string][]byte{"tokens.csv": TokenFile(password)}),
	}
	for name, id := range map[string]string{ControllerManagerKubeconf: hc.ControllerManagerClient, SchedulerKubeconf: hc.SchedulerClient, hc.LocalKubeconfigSecret: hc.AdminClient} {
		pair, err := store.Pair(id)
		if err != nil {
			return nil, err
		}
		kc, err := hostedcp.Kubeconfig(ns, server, ca.CertPEM, pair.Cert.Subject.CommonName, pair.CertPEM, pair.KeyPEM, "")
		if err != nil {
			return nil, err
		}
		objs = append(objs, secret(ns, name, map[string][]byte{hc.KubeconfigKey: kc}))
	}
	return objs, nil
}

func secret(ns, name string, data map[string][]byte) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels("control-plane")}, Data: data}
}

// hash digests what the Pods read, so a changed certificate or password
// rolls them.
func hash(pkiData map[string][]byte, secrets []client.Object) string {
	h := sha256.New()
	write := func(name string, data map[string][]byte) {
		keys := make([]string, 0, len(data))
		for k := range data {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			fmt.Fprintf(h, "%s/%s=%x\n", name, k, sha256.Sum256(data[k]))
		}
	}
	write(hc.PKISecret, pkiData)
	write(EgressSelectorConfigMap, map[string][]byte{EgressSelectorKey: []byte(EgressSelector)})
	for _, o := range secrets {
		write(o.GetName(), o.(*corev1.Secret).Data)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}
