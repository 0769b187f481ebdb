package hostedclusterbootstrap

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hc "github.com/tekvirt/tekvirt/contracts/hostedcluster"
	"github.com/tekvirt/tekvirt/contracts/podsecurity"
	"github.com/tekvirt/tekvirt/tasks/hostedcp"
)

// routerRole is the router's ClusterRole (and its binding's name).
const routerRole = "tekvirt:router"

// routerLabels select the router's Pods, with the label OpenShift's
// ingress operator gives the default IngressController's.
var routerLabels = map[string]string{"ingresscontroller.operator.openshift.io/deployment-ingresscontroller": "default"}

// RouterObjects are the hosted cluster's default ingress: the router
// (image, serving Ingresses for domain; replicas of it) with its rights, the cluster's
// default IngressClass, and the NodePort Service the infrastructure's
// passthrough Service forwards to.
func RouterObjects(image, domain string, replicas int32) []client.Object {
	ns := hc.RouterNamespace
	return []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "router"}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: routerRole}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"ingresses"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"ingresses/status"}, Verbs: []string{"update"}},
			{APIGroups: []string{""}, Resources: []string{"services", "secrets"}, Verbs: []string{"list", "watch"}},
		}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: routerRole},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: routerRole},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "router"}}},
		// Its own namespace's Secrets: the default certificate, made when absent.
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: routerRole}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "create"}},
		}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: routerRole},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: routerRole},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "router"}}},
		&networkingv1.IngressClass{
			ObjectMeta: metav1.ObjectMeta{Name: hc.IngressClass, Annotations: map[string]string{networkingv1.AnnotationIsDefaultIngressClass: "true"}},
			Spec:       networkingv1.IngressClassSpec{Controller: hc.IngressController},
		},
		routerDeployment(image, domain, replicas),
		&corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: hc.RouterService, Labels: routerLabels},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Selector: routerLabels, Ports: []corev1.ServicePort{
				{Name: hc.RouterHTTPPortName, Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromString(hc.RouterHTTPPortName)},
				{Name: hc.RouterHTTPSPortName, Port: 443, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromString(hc.RouterHTTPSPortName)},
			}},
		},
	}
}

func routerDeployment(image, domain string, replicas int32) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: hc.RouterNamespace, Name: hc.RouterDeployment, Labels: routerLabels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: routerLabels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: routerLabels},
				Spec: corev1.PodSpec{
					ServiceAccountName:        "router",
					PriorityClassName:         "system-cluster-critical",
					TopologySpreadConstraints: hostedcp.SpreadOverNodes(routerLabels),
					SecurityContext:           podsecurity.Pod(65532),
					Containers: []corev1.Container{{
						Name: "router", Image: image, Args: []string{"--domain=" + domain},
						Ports: []corev1.ContainerPort{
							{Name: hc.RouterHTTPPortName, ContainerPort: hc.RouterHTTPPort, Protocol: corev1.ProtocolTCP},
							{Name: hc.RouterHTTPSPortName, ContainerPort: hc.RouterHTTPSPort, Protocol: corev1.ProtocolTCP},
							{Name: "health", ContainerPort: hc.RouterHealthPort, Protocol: corev1.ProtocolTCP},
						},
						SecurityContext: readOnlyRoot(podsecurity.Container()),
						// Patient probes, as the DNS's: workers' CPUs may be emulated.
						ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("health")}},
							TimeoutSeconds: 5},
						LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("health")}},
							InitialDelaySeconds: 60, TimeoutSeconds: 5, FailureThreshold: 5},
					}},
				},
			},
		},
	}
}

// readOnlyRoot is sc with a read-only root file system.
func readOnlyRoot(sc *corev1.SecurityContext) *corev1.SecurityContext {
	sc.ReadOnlyRootFilesystem = ptr.To(true)
	return sc
}

// EnsureRouter applies the hosted cluster's default ingress
// (RouterObjects) with c, a client of the hosted cluster.
func EnsureRouter(ctx context.Context, c client.Client, image, domain string, replicas int32) error {
	if err := hostedcp.Apply(ctx, c, FieldOwner, RouterObjects(image, domain, replicas)...); err != nil {
		return fmt.Errorf("the hosted cluster's default ingress: %w", err)
	}
	return nil
}
