package hostedservices

import (
	"reflect"
	"testing"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	hc "github.com/tekvirt/tekvirt/contracts/hostedcluster"
)

func hostedLB() *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "1b4e28ba-2fa1-11d2-883f-0016d3cca427",
			Annotations: map[string]string{"metallb.universe.tf/loadBalancerIPs": "10.0.0.1"}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, LoadBalancerIP: "10.96.0.1", ExternalIPs: []string{"10.96.0.10"},
			Ports: []corev1.ServicePort{
				{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080), NodePort: 30080},
				{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53, NodePort: 30053},
				{Name: "none", Protocol: corev1.ProtocolTCP, Port: 81},
			}},
	}
}

var cluster = &hyperv1.HostedCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "clusters", Name: "demo", UID: "0f8fad5b-d9cb-469f-a165-70867728950e"}}

func TestLoadBalancerService(t *testing.T) {
	got := LoadBalancerService(cluster, "clusters-demo", hostedLB())
	if got.Name != "a1b4e28ba2fa111d2883f0016d3cca42" || len(got.Name) != 32 || got.Namespace != "clusters-demo" {
		t.Errorf("name %s/%s, want the cloud providers' default a<uid>[:32] in the control-plane namespace", got.Namespace, got.Name)
	}
	wantLabels := map[string]string{ClusterNameLabel: "demo", TenantServiceNameLabel: "web", TenantServiceNamespaceLabel: "shop", hc.ComponentLabel: LoadBalancerComponent}
	if !reflect.DeepEqual(got.Labels, wantLabels) {
		t.Errorf("labels %v, want %v", got.Labels, wantLabels)
	}
	wantPorts := []corev1.ServicePort{
		{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(30080)},
		{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53, TargetPort: intstr.FromInt32(30053)},
	}
	if !reflect.DeepEqual(got.Spec.Ports, wantPorts) {
		t.Errorf("ports %+v, want %+v (each port to its node port; one without a node port left out)", got.Spec.Ports, wantPorts)
	}
	if got.Spec.Type != corev1.ServiceTypeLoadBalancer || got.Spec.Selector != nil || ptr.Deref(got.Spec.AllocateLoadBalancerNodePorts, true) {
		t.Errorf("spec %+v: want a selector-less LoadBalancer without infrastructure node ports", got.Spec)
	}
	if got.Annotations != nil || got.Spec.LoadBalancerIP != "" || got.Spec.ExternalIPs != nil {
		t.Errorf("the hosted Service's annotations, loadBalancerIP or externalIPs reached the infrastructure: %v %q %v", got.Annotations, got.Spec.LoadBalancerIP, got.Spec.ExternalIPs)
	}
	noPorts := hostedLB()
	noPorts.Spec.Ports = noPorts.Spec.Ports[2:]
	if s := LoadBalancerService(cluster, "clusters-demo", noPorts); s != nil {
		t.Errorf("a Service without node ports published as %+v", s)
	}
}

func TestPublishes(t *testing.T) {
	lb, class, nodePort := hostedLB(), hostedLB(), hostedLB()
	class.Spec.LoadBalancerClass = ptr.To("example.com/other")
	nodePort.Spec.Type = corev1.ServiceTypeNodePort
	for _, tt := range []struct {
		svc  *corev1.Service
		want bool
	}{{lb, true}, {class, false}, {nodePort, false}} {
		if got := Publishes(tt.svc); got != tt.want {
			t.Errorf("type %s class %v: Publishes %v, want %v", tt.svc.Spec.Type, tt.svc.Spec.LoadBalancerClass, got, tt.want)
		}
	}
}

func TestPassthroughService(t *testing.T) {
	withID := cluster.DeepCopy()
	withID.Spec.Platform.Kubevirt = &hyperv1.KubevirtPlatformSpec{GenerateID: "x7k2m9p4qz"}
	router := &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Ports: []corev1.ServicePort{
		{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, NodePort: 31080},
		{Name: "https", Protocol: corev1.ProtocolTCP, Port: 443, NodePort: 31443},
	}}}
	byNumber := &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Ports: []corev1.ServicePort{
		{Name: "tls", Protocol: corev1.ProtocolTCP, Port: 443, NodePort: 32443},
	}}}
	tests := []struct {
		name       string
		cluster    *hyperv1.HostedCluster
		router     *corev1.Service
		wantName   string
		wantTarget []intstr.IntOrString
	}{
		{"generateID, router by port name", withID, router, "default-ingress-passthrough-service-x7k2m9p4qz", []intstr.IntOrString{intstr.FromInt32(31443), intstr.FromInt32(31080)}},
		{"no generateID: the UID's start; router by port number", cluster, byNumber, "default-ingress-passthrough-service-0f8fad5bd9", []intstr.IntOrString{intstr.FromInt32(32443), intstr.FromString("http")}},
		{"no router yet", withID, nil, "default-ingress-passthrough-service-x7k2m9p4qz", []intstr.IntOrString{intstr.FromString("https"), intstr.FromString("http")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := PassthroughService(tt.cluster, "clusters-demo", tt.router)
			if got.Name != tt.wantName || got.Spec.Type != corev1.ServiceTypeClusterIP || got.Spec.Selector != nil {
				t.Errorf("Service %s type %s selector %v", got.Name, got.Spec.Type, got.Spec.Selector)
			}
			if len(got.Spec.Ports) != 2 || got.Spec.Ports[0].Name != "https-443" || got.Spec.Ports[0].Port != 443 || got.Spec.Ports[1].Name != "http-80" || got.Spec.Ports[1].Port != 80 {
				t.Fatalf("ports %+v, want https-443 and http-80", got.Spec.Ports)
			}
			for i, want := range tt.wantTarget {
				if got.Spec.Ports[i].TargetPort != want {
					t.Errorf("port %s targets %v, want %v", got.Spec.Ports[i].Name, got.Spec.Ports[i].TargetPort, want)
				}
			}
		})
	}
}

func TestEndpointSlice(t *testing.T) {
	workers := []Worker{{"w1", "10.1.0.2", "infra-1", true}, {"w2", "10.1.0.3", "infra-2", false}}
	lb := LoadBalancerService(cluster, "clusters-demo", hostedLB())
	lb.UID = "svc-uid"
	s := EndpointSlice(lb, workers, nil)
	if s.Name != lb.Name+"-ipv4" || s.Labels["kubernetes.io/service-name"] != lb.Name || s.Labels["endpointslice.kubernetes.io/managed-by"] != ManagedBy {
		t.Errorf("slice %s labels %v", s.Name, s.Labels)
	}
	if len(s.OwnerReferences) != 1 || s.OwnerReferences[0].UID != "svc-uid" {
		t.Errorf("owners %+v, want the Service", s.OwnerReferences)
	}
	if len(s.Ports) != 2 || *s.Ports[0].Name != "http" || *s.Ports[0].Port != 30080 || *s.Ports[1].Protocol != corev1.ProtocolUDP || *s.Ports[1].Port != 30053 {
		t.Errorf("ports %+v, want each Service port at its node port", s.Ports)
	}
	if len(s.Endpoints) != 2 || s.Endpoints[0].Addresses[0] != "10.1.0.2" || !*s.Endpoints[0].Conditions.Ready || *s.Endpoints[1].Conditions.Ready ||
		*s.Endpoints[1].NodeName != "infra-2" || s.Endpoints[1].TargetRef.Name != "w2" || s.Endpoints[1].TargetRef.Kind != "VirtualMachineInstance" {
		t.Errorf("endpoints %+v", s.Endpoints)
	}
	if local := EndpointSlice(lb, workers, map[string]bool{"w2": true}); len(local.Endpoints) != 1 || local.Endpoints[0].Addresses[0] != "10.1.0.3" {
		t.Errorf("externalTrafficPolicy Local: endpoints %+v, want w2 only", local.Endpoints)
	}
	if none := EndpointSlice(PassthroughService(cluster, "clusters-demo", nil), workers, nil); len(none.Ports) != 0 || len(none.Endpoints) != 0 {
		t.Errorf("passthrough without a router: ports %+v endpoints %+v, want none", none.Ports, none.Endpoints)
	}
}

func TestLoadBalancerStatus(t *testing.T) {
	provided := &corev1.Service{Spec: corev1.ServiceSpec{ClusterIP: "10.96.3.4"},
		Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "192.0.2.7"}}}}}
	tests := []struct {
		name  string
		infra *corev1.Service
		want  []corev1.LoadBalancerIngress
	}{
		{"the infrastructure's load balancer", provided, []corev1.LoadBalancerIngress{{IP: "192.0.2.7"}}},
		{"no provider: the cluster address", &corev1.Service{Spec: corev1.ServiceSpec{ClusterIP: "10.96.3.4"}}, []corev1.LoadBalancerIngress{{IP: "10.96.3.4"}}},
		{"neither", &corev1.Service{}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := LoadBalancerStatus(tt.infra).Ingress; !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}
