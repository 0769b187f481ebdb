package hostedclusterbootstrap

import (
	"context"
	"fmt"
	"net"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hc "github.com/tekvirt/tekvirt/contracts/hostedcluster"
	"github.com/tekvirt/tekvirt/contracts/podsecurity"
	"github.com/tekvirt/tekvirt/tasks/hostedcp"
)

// konnectivityHealthPort is the agents' health port on each worker (on
// the node's network), HyperShift's choice: clear of the kubelet's and
// kube-proxy's ports and of the node port range.
const konnectivityHealthPort = 2041

var konnectivityLabels = map[string]string{"app": hc.KonnectivityAgent}

// Agent is what a worker's Konnectivity agent needs: the proxy server's
// address (its Service's ClusterIP in the infrastructure, which workers
// reach) and the agents' certificate with the CA of both.
type Agent struct {
	Image         string
	Server        net.IP
	CA, Cert, Key []byte
}

// KonnectivityObjects are the agents in the hosted kube-system: their
// certificate's Secret and a DaemonSet on every node's network, each
// agent naming its node's address so that the proxy server sends a
// connection to a kubelet through that node's own agent.
func KonnectivityObjects(a Agent) []client.Object {
	ns := metav1.NamespaceSystem
	const dir = "/etc/konnectivity/"
	return []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: hc.KonnectivityAgent}, Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{"ca.crt": a.CA, corev1.TLSCertKey: a.Cert, corev1.TLSPrivateKeyKey: a.Key}},
		&appsv1.DaemonSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: hc.KonnectivityAgent, Labels: konnectivityLabels},
			Spec: appsv1.DaemonSetSpec{
				Selector: &metav1.LabelSelector{MatchLabels: konnectivityLabels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: konnectivityLabels},
					Spec: corev1.PodSpec{
						HostNetwork:                  true,
						PriorityClassName:            "system-node-critical",
						AutomountServiceAccountToken: ptr.To(false),
						Tolerations:                  []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
						SecurityContext:              podsecurity.Pod(65532),
						Volumes: []corev1.Volume{{Name: "certs", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
							SecretName: hc.KonnectivityAgent, DefaultMode: ptr.To(int32(0o400))}}}},
						Containers: []corev1.Container{{
							Name: "konnectivity-agent", Image: a.Image,
							Command: []string{"/usr/bin/proxy-agent",
								"--proxy-server-host=" + a.Server.String(), fmt.Sprintf("--proxy-server-port=%d", hc.KonnectivityAgentPort),
								"--ca-cert=" + dir + "ca.crt", "--agent-cert=" + dir + corev1.TLSCertKey, "--agent-key=" + dir + corev1.TLSPrivateKeyKey,
								"--agent-identifiers=ipv4=$(HOST_IP)",
								fmt.Sprintf("--health-server-port=%d", konnectivityHealthPort),
								// Follows the proxy servers as the API server's replicas come and go.
								"--sync-forever=true", "--keepalive-time=30s",
								// Its default (4) logs every packet.
								"--v=1",
							},
							Env:             []corev1.EnvVar{{Name: "HOST_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.hostIP"}}}},
							VolumeMounts:    []corev1.VolumeMount{{Name: "certs", MountPath: dir, ReadOnly: true}},
							SecurityContext: readOnlyRoot(podsecurity.Container()),
							// Ready once it holds a tunnel to a proxy server.
							ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz",
								Port: intstr.FromInt32(konnectivityHealthPort)}}, TimeoutSeconds: 5},
							LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz",
								Port: intstr.FromInt32(konnectivityHealthPort)}}, InitialDelaySeconds: 60, TimeoutSeconds: 5, FailureThreshold: 5},
						}},
					},
				},
			},
		},
	}
}

// agentOf reads what the agents need from the control plane in ns.
func agentOf(ctx context.Context, c client.Client, ns, image string) (Agent, error) {
	ip, err := hostedcp.ServiceIP(ctx, c, ns, hc.KonnectivityService)
	if err != nil {
		return Agent{}, fmt.Errorf("%w (run hosted-cluster-control-plane first)", err)
	}
	store, err := hostedcp.LoadPKI(ctx, c, ns)
	if err != nil {
		return Agent{}, err
	}
	ca, err := store.Pair(hc.KonnectivityCAKey)
	if err != nil {
		return Agent{}, err
	}
	cert, err := store.Pair(hc.KonnectivityAgentClient)
	if err != nil {
		return Agent{}, err
	}
	return Agent{Image: image, Server: ip, CA: ca.CertPEM, Cert: cert.CertPEM, Key: cert.KeyPEM}, nil
}

// EnsureKonnectivity applies the agents (KonnectivityObjects) with c, a
// client of the hosted cluster.
func EnsureKonnectivity(ctx context.Context, c client.Client, a Agent) error {
	if err := hostedcp.Apply(ctx, c, FieldOwner, KonnectivityObjects(a)...); err != nil {
		return fmt.Errorf("the hosted cluster's Konnectivity agents: %w", err)
	}
	return nil
}
