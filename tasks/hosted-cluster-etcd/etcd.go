package hostedclusteretcd

import (
	"context"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hc "github.com/tekvirt/tekvirt/contracts/hostedcluster"
	"github.com/tekvirt/tekvirt/contracts/pki"
	"github.com/tekvirt/tekvirt/contracts/podsecurity"
	"github.com/tekvirt/tekvirt/tasks/hostedcp"
)

// FieldOwner is the task's server-side apply owner.
const FieldOwner = "hosted-cluster-etcd"

// Names of the objects made besides the Services of the contract.
const (
	ServingSecret = "etcd-serving"
	ConfigSecret  = "etcd-config"
	servingLife   = 365 * 24 * time.Hour
	dataDir       = "/var/lib/etcd"
	tlsDir        = "/etc/etcd/tls"
	// servingCN is the common name of the members' serving certificate.
	servingCN = "etcd"
	// The peer client certificate's files in the serving Secret.
	peerClientCert = "peer-client.crt"
	peerClientKey  = "peer-client.key"
)

// Params are the task's params.
type Params struct {
	Namespace        string
	Image            string
	Replicas         int
	StorageClassName string
	StorageSize      string
	Timeout          time.Duration
}

// Result is the client endpoint.
type Result struct{ Endpoint string }

// Map is the task's results.
func (r Result) Map() map[string]string { return map[string]string{"endpoint": r.Endpoint} }

func (p Params) check() error {
	switch {
	case p.Namespace == "":
		return fmt.Errorf("controlPlaneNamespace is required")
	case p.Image == "":
		return fmt.Errorf("releaseImage is required")
	case p.Replicas != 1 && p.Replicas != 3:
		return fmt.Errorf("replicas: %d; etcd runs 1 or 3 members", p.Replicas)
	}
	if _, err := resource.ParseQuantity(p.StorageSize); err != nil {
		return fmt.Errorf("storageSize %q: %w", p.StorageSize, err)
	}
	return nil
}

func labels() map[string]string { return map[string]string{hc.ComponentLabel: "etcd", "app": "etcd"} }

// Services are the client Service and one Service per member, which
// publishes its Pod before it is ready so that members find each other
// while the cluster forms.
func Services(ns string, replicas int) []*corev1.Service {
	port := func(name string, p int32) corev1.ServicePort {
		return corev1.ServicePort{Name: name, Port: p, TargetPort: intstr.FromInt32(p), Protocol: corev1.ProtocolTCP}
	}
	out := []*corev1.Service{{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: hc.EtcdClientService, Labels: labels()},
		Spec:       corev1.ServiceSpec{Selector: labels(), Ports: []corev1.ServicePort{port("client", hc.EtcdClientPort)}},
	}}
	for i := range replicas {
		out = append(out, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: hc.EtcdMemberService(i), Labels: labels()},
			Spec: corev1.ServiceSpec{
				Selector:                 map[string]string{"statefulset.kubernetes.io/pod-name": fmt.Sprintf("%s-%d", hc.EtcdStatefulSet, i)},
				Ports:                    []corev1.ServicePort{port("client", hc.EtcdClientPort), port("peer", hc.EtcdPeerPort)},
				PublishNotReadyAddresses: true,
			},
		})
	}
	return out
}

// ServingRequest is the certificate every member serves clients and peers
// with: all member addresses and the client Service's. Members present the
// address-less peer client certificate when they dial each other.
func ServingRequest(ips []net.IP) pki.Request {
	return pki.Request{CommonName: servingCN, DNSNames: []string{"localhost"}, IPs: slices.Concat(ips, []net.IP{net.IPv4(127, 0, 0, 1)}),
		Usage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, Lifetime: servingLife}
}

// MemberConfig is etcd's configuration file of member i: members are named
// after their Pods and addressed by their Services' IPs. Members dial each
// other with the peer client certificate (no addresses: etcd checks a
// client certificate's addresses against the address it dials from, the
// member's Pod IP, which no certificate names), and the peer port accepts
// only the members' common names: the peer client certificate's, and the
// serving certificate's, which etcd checks too when a member dials (its
// allowed names apply to both ends).
func MemberConfig(ns string, i int, members []net.IP) string {
	peers := make([]string, len(members))
	for j, ip := range members {
		peers[j] = fmt.Sprintf("%s-%d=https://%s", hc.EtcdStatefulSet, j, net.JoinHostPort(ip.String(), fmt.Sprint(hc.EtcdPeerPort)))
	}
	tls := func(name string, extra ...string) string {
		return fmt.Sprintf("%s:\n  cert-file: %s/tls.crt\n  key-file: %s/tls.key\n  trusted-ca-file: %s/ca.crt\n  client-cert-auth: true\n%s",
			name, tlsDir, tlsDir, tlsDir, strings.Join(extra, ""))
	}
	self := members[i].String()
	return fmt.Sprintf(`name: %s-%d
data-dir: %s/data
listen-client-urls: https://0.0.0.0:%d
advertise-client-urls: https://%s
listen-peer-urls: https://0.0.0.0:%d
initial-advertise-peer-urls: https://%s
initial-cluster: %s
initial-cluster-state: new
initial-cluster-token: %s
`, hc.EtcdStatefulSet, i, dataDir, hc.EtcdClientPort, net.JoinHostPort(self, fmt.Sprint(hc.EtcdClientPort)),
		hc.EtcdPeerPort, net.JoinHostPort(self, fmt.Sprint(hc.EtcdPeerPort)), strings.Join(peers, ","), ns) +
		tls("client-transport-security") +
		tls("peer-transport-security",
			fmt.Sprintf("  client-cert-file: %s/%s\n  client-key-file: %s/%s\n", tlsDir, peerClientCert, tlsDir, peerClientKey),
			fmt.Sprintf("  allowed-cn: [%s, %s]\n", hc.EtcdPeerCommonName, servingCN))
}

// spread spreads the members over the nodes where they can go: a
// preference, not a rule, since a member goes where its volume is, and a
// class that binds volumes at once (not WaitForFirstConsumer) may have put
// them all on one node before any member was scheduled.
func spread() []corev1.TopologySpreadConstraint {
	c := hostedcp.SpreadOverNodes(labels())
	c[0].WhenUnsatisfiable = corev1.ScheduleAnyway
	return c
}

// StatefulSet runs the members; each reads its own configuration file.
func StatefulSet(p Params) *appsv1.StatefulSet {
	replicas := int32(p.Replicas)
	var class *string
	if p.StorageClassName != "" {
		class = &p.StorageClassName
	}
	mode := int32(0o400)
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: hc.EtcdStatefulSet, Labels: labels()},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            &replicas,
			ServiceName:         hc.EtcdClientService,
			PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector:            &metav1.LabelSelector{MatchLabels: labels()},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels()},
				Spec: corev1.PodSpec{
					AutomountServiceAccountToken: new(bool),
					EnableServiceLinks:           new(bool),
					TopologySpreadConstraints:    spread(),
					SecurityContext:              podsecurity.Pod(hc.ControlPlaneUser),
					Containers: []corev1.Container{{
						Name:            "etcd",
						SecurityContext: podsecurity.Container(),
						Image:           p.Image,
						Command:         []string{"/usr/bin/etcd", "--config-file=/etc/etcd/config/$(POD_NAME).yaml"},
						Env: []corev1.EnvVar{{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{
							FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
						Ports: []corev1.ContainerPort{{Name: "client", ContainerPort: hc.EtcdClientPort}, {Name: "peer", ContainerPort: hc.EtcdPeerPort}},
						// A TCP probe: etcd's health endpoint asks for a client
						// certificate, and a plain metrics listener would be
						// readable by every Pod.
						ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(hc.EtcdClientPort)}},
							PeriodSeconds: 2},
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU: resource.MustParse("20m"), corev1.ResourceMemory: resource.MustParse("64Mi")}},
						VolumeMounts: []corev1.VolumeMount{
							{Name: "data", MountPath: dataDir},
							{Name: "config", MountPath: "/etc/etcd/config", ReadOnly: true},
							{Name: "tls", MountPath: tlsDir, ReadOnly: true},
						},
					}},
					Volumes: []corev1.Volume{
						{Name: "config", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: ConfigSecret, DefaultMode: &mode}}},
						{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: ServingSecret, DefaultMode: &mode}}},
					},
				},
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data", Labels: labels()},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					StorageClassName: class,
					Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(p.StorageSize)}},
				},
			}},
		},
	}
}

// Run makes etcd in p.Namespace and waits until every member is ready.
func Run(ctx context.Context, c client.Client, p Params, out io.Writer) (Result, error) {
	if err := p.check(); err != nil {
		return Result{}, err
	}
	ns := p.Namespace
	for _, svc := range Services(ns, p.Replicas) {
		if err := hostedcp.Apply(ctx, c, FieldOwner, svc); err != nil {
			return Result{}, err
		}
	}
	clientIP, err := hostedcp.ServiceIP(ctx, c, ns, hc.EtcdClientService)
	if err != nil {
		return Result{}, err
	}
	members := make([]net.IP, p.Replicas)
	for i := range members {
		if members[i], err = hostedcp.ServiceIP(ctx, c, ns, hc.EtcdMemberService(i)); err != nil {
			return Result{}, err
		}
	}
	if err := ensureServing(ctx, c, ns, append([]net.IP{clientIP}, members...), out); err != nil {
		return Result{}, err
	}
	config := map[string][]byte{}
	for i := range members {
		config[fmt.Sprintf("%s-%d.yaml", hc.EtcdStatefulSet, i)] = []byte(MemberConfig(ns, i, members))
	}
	cfg := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ConfigSecret, Labels: labels()}, Data: config}
	if err := hostedcp.Apply(ctx, c, FieldOwner, cfg, StatefulSet(p)); err != nil {
		return Result{}, err
	}
	res := Result{Endpoint: "https://" + net.JoinHostPort(clientIP.String(), fmt.Sprint(hc.EtcdClientPort))}
	err = hostedcp.Wait(ctx, out, "etcd", p.Timeout, 2*time.Second, func(ctx context.Context) (bool, string, error) {
		sts := &appsv1.StatefulSet{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: hc.EtcdStatefulSet}, sts); err != nil {
			return false, "", fmt.Errorf("reading StatefulSet %s/%s: %w", ns, hc.EtcdStatefulSet, err)
		}
		return sts.Status.ReadyReplicas == int32(p.Replicas) && sts.Status.ObservedGeneration >= sts.Generation,
			fmt.Sprintf("%d/%d members ready", sts.Status.ReadyReplicas, p.Replicas), nil
	})
	return res, err
}

// ensureServing keeps the serving Secret while its certificate is current
// for ips, else issues a new one from the etcd CA; the Secret also holds
// the peer client certificate from the PKI Secret.
func ensureServing(ctx context.Context, c client.Client, ns string, ips []net.IP, out io.Writer) error {
	store, err := hostedcp.LoadPKI(ctx, c, ns)
	if err != nil {
		return err
	}
	ca, err := store.Pair(hc.EtcdCAKey)
	if err != nil {
		return err
	}
	peer, err := store.Pair(hc.EtcdPeerClient)
	if err != nil {
		return err
	}
	kp, issued, err := hostedcp.ServingCert(ctx, c, ns, ServingSecret, ca, ServingRequest(ips))
	if err != nil {
		return err
	}
	if issued {
		fmt.Fprintf(out, "Secret %s/%s: issued for %v\n", ns, ServingSecret, ips)
	}
	return hostedcp.Apply(ctx, c, FieldOwner, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ServingSecret, Labels: labels()},
		Data: map[string][]byte{corev1.TLSCertKey: kp.CertPEM, corev1.TLSPrivateKeyKey: kp.KeyPEM, "ca.crt": ca.CertPEM,
			peerClientCert: peer.CertPEM, peerClientKey: peer.KeyPEM},
	})
}
