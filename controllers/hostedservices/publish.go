package hostedservices

import (
	"strings"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"

	hc "github.com/tekvirt/tekvirt/contracts/hostedcluster"
)

// Labels of the infrastructure Services, as the KubeVirt cloud provider
// labels those it makes for hosted LoadBalancer Services.
const (
	ClusterNameLabel            = "cluster.x-k8s.io/cluster-name"
	TenantServiceNameLabel      = "cluster.x-k8s.io/tenant-service-name"
	TenantServiceNamespaceLabel = "cluster.x-k8s.io/tenant-service-namespace"
)

// Components (hc.ComponentLabel) of the infrastructure Services.
const (
	LoadBalancerComponent       = "load-balancer"
	IngressPassthroughComponent = "ingress-passthrough"
)

// ManagedBy marks the EndpointSlices this package writes, so that
// Kubernetes' own EndpointSlice controllers leave them alone.
const ManagedBy = "hosted-services.tekvirt.io"

// PassthroughServicePrefix begins the name of the infrastructure Service
// that passes the hosted cluster's default ingress (hc.RouterService)
// through.
const PassthroughServicePrefix = "default-ingress-passthrough-service-"

// LoadBalancerName is the infrastructure Service of hosted Service svc, as
// Kubernetes' cloud providers name a Service's load balancer by default:
// "a" and its UID without dashes, at most 32 characters.
func LoadBalancerName(svc *corev1.Service) string {
	name := "a" + strings.ReplaceAll(string(svc.UID), "-", "")
	if len(name) > 32 {
		name = name[:32]
	}
	return name
}

// Publishes says whether hosted Service svc is one this package publishes:
// a LoadBalancer of no other load-balancer class.
func Publishes(svc *corev1.Service) bool {
	return svc.Spec.Type == corev1.ServiceTypeLoadBalancer && svc.Spec.LoadBalancerClass == nil && svc.DeletionTimestamp.IsZero()
}

// LoadBalancerService is the infrastructure Service in cpNS that publishes
// hosted Service svc of cluster: of type LoadBalancer, each of svc's ports
// forwarded to its node port on the workers. Nothing else of svc is taken:
// not its annotations, loadBalancerIP or externalIPs, which would let a
// hosted cluster's admin steer the infrastructure's load balancers or
// claim addresses there. Infrastructure node ports are not allocated, so a
// hosted cluster cannot use up the infrastructure's. Nil when svc has no
// node port to forward to.
func LoadBalancerService(cluster *hyperv1.HostedCluster, cpNS string, svc *corev1.Service) *corev1.Service {
	var ports []corev1.ServicePort
	for _, p := range svc.Spec.Ports {
		if p.NodePort == 0 {
			continue
		}
		ports = append(ports, corev1.ServicePort{Name: p.Name, Protocol: p.Protocol, Port: p.Port, TargetPort: intstr.FromInt32(p.NodePort)})
	}
	if len(ports) == 0 {
		return nil
	}
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: cpNS, Name: LoadBalancerName(svc), Labels: map[string]string{
			ClusterNameLabel: cluster.Name, TenantServiceNameLabel: svc.Name, TenantServiceNamespaceLabel: svc.Namespace,
			hc.ComponentLabel: LoadBalancerComponent,
		}},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeLoadBalancer, Ports: ports,
			AllocateLoadBalancerNodePorts: ptr.To(false),
		},
	}
}

// PassthroughName is the name of cluster's default-ingress passthrough
// Service: HyperShift's, suffixed with spec.platform.kubevirt.generateID,
// else (a HostedCluster made without one) with its UID's first ten
// characters.
func PassthroughName(cluster *hyperv1.HostedCluster) string {
	id := ""
	if k := cluster.Spec.Platform.Kubevirt; k != nil {
		id = k.GenerateID
	}
	if id == "" {
		id = strings.ReplaceAll(string(cluster.UID), "-", "")
		id = id[:min(len(id), 10)]
	}
	return PassthroughServicePrefix + id
}

// Passthrough ports, as HyperShift names them, and the hosted router's
// ports they lead to (by name, else by number).
var passthroughPorts = []struct {
	name   string
	port   int32
	router string
}{{"https-443", 443, "https"}, {"http-80", 80, "http"}}

// PassthroughService is cluster's default-ingress passthrough Service in
// cpNS: a ClusterIP Service whose ports 443 and 80 lead to the hosted
// router's node ports. Until the hosted cluster has a router (router is
// nil), or where it has no such port, the target port is the router's
// port name, and the Service has no endpoints.
func PassthroughService(cluster *hyperv1.HostedCluster, cpNS string, router *corev1.Service) *corev1.Service {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: cpNS, Name: PassthroughName(cluster), Labels: map[string]string{
			ClusterNameLabel: cluster.Name, hc.ComponentLabel: IngressPassthroughComponent,
		}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP},
	}
	for _, pp := range passthroughPorts {
		target := intstr.FromString(pp.router)
		if np := routerNodePort(router, pp.router, pp.port); np != 0 {
			target = intstr.FromInt32(np)
		}
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: pp.name, Protocol: corev1.ProtocolTCP, Port: pp.port, TargetPort: target})
	}
	return svc
}

// routerNodePort is the node port of router's port named name (else
// numbered port), or 0.
func routerNodePort(router *corev1.Service, name string, port int32) int32 {
	if router == nil {
		return 0
	}
	for _, p := range router.Spec.Ports {
		if p.Name == name && p.Protocol == corev1.ProtocolTCP {
			return p.NodePort
		}
	}
	for _, p := range router.Spec.Ports {
		if p.Port == port && p.Protocol == corev1.ProtocolTCP {
			return p.NodePort
		}
	}
	return 0
}

// SliceName is the EndpointSlice of infrastructure Service svc.
func SliceName(svc *corev1.Service) string { return svc.Name + "-ipv4" }

// EndpointSlice lists workers behind infrastructure Service svc (as
// LoadBalancerService or PassthroughService made it, with its UID once
// created, which the slice is owned by): each Service port at the worker's
// node port (the Service's target port). only, when not nil, keeps the
// workers named in it (a hosted Service with externalTrafficPolicy Local:
// the workers that run one of its endpoints). A Service whose target ports
// are not node ports yet (the passthrough before a router exists) gets no
// endpoints.
func EndpointSlice(svc *corev1.Service, workers []Worker, only map[string]bool) *discoveryv1.EndpointSlice {
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: svc.Namespace, Name: SliceName(svc), Labels: map[string]string{
			discoveryv1.LabelServiceName: svc.Name, discoveryv1.LabelManagedBy: ManagedBy,
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
	if svc.UID != "" {
		slice.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: svc.Name, UID: svc.UID, Controller: ptr.To(true)}}
	}
	for _, p := range svc.Spec.Ports {
		if p.TargetPort.Type != intstr.Int {
			continue
		}
		slice.Ports = append(slice.Ports, discoveryv1.EndpointPort{Name: ptr.To(p.Name), Protocol: ptr.To(p.Protocol), Port: ptr.To(p.TargetPort.IntVal)})
	}
	if len(slice.Ports) == 0 {
		return slice
	}
	for _, w := range workers {
		if only != nil && !only[w.Name] {
			continue
		}
		ep := discoveryv1.Endpoint{
			Addresses:  []string{w.Address},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(w.Ready), Serving: ptr.To(w.Ready), Terminating: ptr.To(false)},
			TargetRef:  &corev1.ObjectReference{APIVersion: kubevirtv1.SchemeGroupVersion.String(), Kind: "VirtualMachineInstance", Namespace: svc.Namespace, Name: w.Name},
		}
		if w.InfraNode != "" {
			ep.NodeName = ptr.To(w.InfraNode)
		}
		slice.Endpoints = append(slice.Endpoints, ep)
	}
	return slice
}

// LoadBalancerStatus is what hosted Service's status says of infrastructure
// Service infra: the infrastructure's load-balancer addresses when it has
// any; on an infrastructure cluster without a load-balancer provider, the
// Service's cluster address, which the infrastructure's Pods and nodes
// reach. Empty while infra has neither.
func LoadBalancerStatus(infra *corev1.Service) corev1.LoadBalancerStatus {
	if len(infra.Status.LoadBalancer.Ingress) > 0 {
		return *infra.Status.LoadBalancer.DeepCopy()
	}
	if ip := infra.Spec.ClusterIP; ip != "" && ip != corev1.ClusterIPNone {
		return corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: ip}}}
	}
	return corev1.LoadBalancerStatus{}
}
