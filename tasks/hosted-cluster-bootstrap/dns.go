package hostedclusterbootstrap

import (
	"context"
	"fmt"
	"net/netip"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tekvirt/tekvirt/tasks/hostedcp"
)

// The hosted cluster's DNS, as kubeadm deploys CoreDNS: Deployment
// kube-system/coredns behind Service kube-dns at the address the workers'
// kubelets name (ClusterDNS). Names outside the cluster go to the
// resolver the worker has (the infrastructure's cluster DNS, which its
// DHCP lease names).
const (
	dnsNamespace  = metav1.NamespaceSystem
	DNSDeployment = "coredns"
	DNSService    = "kube-dns"
	dnsRole       = "system:coredns"
)

// corefile is kubeadm's Corefile for zone cluster.local.
const corefile = `.:53 {
    errors
    health {
        lameduck 5s
    }
    ready
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 30
    }
    prometheus :9153
    forward . /etc/resolv.conf
    cache 30
    loop
    reload
    loadbalance
}
`

// DNSObjects are the hosted cluster's DNS objects: CoreDNS (image) with
// its rights, configuration and Service at address.
func DNSObjects(image string, address netip.Addr) []client.Object {
	labels := map[string]string{"k8s-app": "kube-dns"}
	return []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: dnsNamespace, Name: DNSDeployment}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: dnsRole}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"endpoints", "services", "pods", "namespaces"}, Verbs: []string{"list", "watch"}},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
		}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: dnsRole},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: dnsRole},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: dnsNamespace, Name: DNSDeployment}}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: dnsNamespace, Name: DNSDeployment}, Data: map[string]string{"Corefile": corefile}},
		dnsDeployment(image, labels),
		&corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: dnsNamespace, Name: DNSService,
				Labels: map[string]string{"k8s-app": "kube-dns", "kubernetes.io/name": "CoreDNS"}},
			Spec: corev1.ServiceSpec{Selector: labels, ClusterIP: address.String(), Ports: []corev1.ServicePort{
				{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(53)},
				{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(53)},
				{Name: "metrics", Port: 9153, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(9153)},
			}},
		},
	}
}

func dnsDeployment(image string, labels map[string]string) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: dnsNamespace, Name: DNSDeployment, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(2)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					ServiceAccountName:        DNSDeployment,
					PriorityClassName:         "system-cluster-critical",
					DNSPolicy:                 corev1.DNSDefault,
					TopologySpreadConstraints: hostedcp.SpreadOverNodes(labels),
					Tolerations:               []corev1.Toleration{{Key: "CriticalAddonsOnly", Operator: corev1.TolerationOpExists}},
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To(int64(65532)), RunAsGroup: ptr.To(int64(65532)),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
						Sysctls:        []corev1.Sysctl{{Name: "net.ipv4.ip_unprivileged_port_start", Value: "53"}},
					},
					Containers: []corev1.Container{{
						Name: "coredns", Image: image, Args: []string{"-conf", "/etc/coredns/Corefile"},
						Ports: []corev1.ContainerPort{
							{Name: "dns", ContainerPort: 53, Protocol: corev1.ProtocolUDP},
							{Name: "dns-tcp", ContainerPort: 53, Protocol: corev1.ProtocolTCP},
							{Name: "metrics", ContainerPort: 9153, Protocol: corev1.ProtocolTCP},
						},
						SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
							Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
						VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/coredns", ReadOnly: true}},
						// kubeadm's probes: a worker's emulated CPU under load
						// answers slowly, and a DNS restarted on every slow answer
						// is worse than a slow one.
						LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/health", Port: intstr.FromInt32(8080)}},
							InitialDelaySeconds: 60, TimeoutSeconds: 5, SuccessThreshold: 1, FailureThreshold: 5},
						ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromInt32(8181)}},
							TimeoutSeconds: 5},
					}},
					Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
						LocalObjectReference: corev1.LocalObjectReference{Name: DNSDeployment},
						Items:                []corev1.KeyToPath{{Key: "Corefile", Path: "Corefile"}},
					}}}},
				},
			},
		},
	}
}

// EnsureDNS applies the hosted cluster's DNS (DNSObjects) with c, a client
// of the hosted cluster.
func EnsureDNS(ctx context.Context, c client.Client, image, serviceCIDR string) error {
	addr, err := ClusterDNS(serviceCIDR)
	if err != nil {
		return err
	}
	if err := hostedcp.Apply(ctx, c, FieldOwner, DNSObjects(image, addr)...); err != nil {
		return fmt.Errorf("the hosted cluster's DNS: %w", err)
	}
	return nil
}
