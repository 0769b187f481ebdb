package hostedclustercontrolplane

import (
	"crypto/x509"
	"fmt"
	"net"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	hc "github.com/tekvirt/tekvirt/contracts/hostedcluster"
	"github.com/tekvirt/tekvirt/contracts/pki"
	"github.com/tekvirt/tekvirt/contracts/podsecurity"
)

// The API server's egress to the hosted cluster goes through the proxy
// server beside it (contracts/hostedcluster's Konnectivity): the two
// containers share a Unix socket on an in-memory volume.
const (
	// EgressSelectorConfigMap holds the API server's egress selector
	// configuration (key EgressSelectorKey).
	EgressSelectorConfigMap = "kube-apiserver-egress-selector"
	EgressSelectorKey       = "egress-selector.yaml"
	konnectivityContainer   = "konnectivity-server"
	konnectivityDir         = "/etc/kubernetes/konnectivity/"
	konnectivitySocket      = "/run/konnectivity/konnectivity-server.socket"
	konnectivityHealthPort  = 8092
)

// EgressSelector sends the API server's connections into the hosted
// cluster (egress "cluster": kubelets, webhooks, aggregated APIs, proxy)
// to the proxy server's socket over gRPC; etcd and the control plane's
// own traffic go direct.
var EgressSelector = fmt.Sprintf(`apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
- name: cluster
  connection:
    proxyProtocol: GRPC
    transport:
      uds:
        udsName: %s
`, konnectivitySocket)

// KonnectivityService publishes the proxy servers' agent port to the
// workers.
func KonnectivityService(ns string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: hc.KonnectivityService, Labels: labels("kube-apiserver")},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: labels("kube-apiserver"),
			Ports: []corev1.ServicePort{{Name: "agent", Port: hc.KonnectivityAgentPort, TargetPort: intstr.FromInt32(hc.KonnectivityAgentPort),
				Protocol: corev1.ProtocolTCP}},
		},
	}
}

// KonnectivityServingRequest is the proxy server's certificate for agents,
// who dial the Service's ClusterIP.
func KonnectivityServingRequest(ns string, clusterIP net.IP) pki.Request {
	base := hc.KonnectivityService + "." + ns
	return pki.Request{CommonName: hc.KonnectivityService,
		DNSNames: []string{hc.KonnectivityService, base, base + ".svc", base + ".svc.cluster.local"},
		IPs:      []net.IP{clusterIP}, Usage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, Lifetime: servingLife}
}

func egressSelectorConfigMap(ns string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: EgressSelectorConfigMap, Labels: labels("kube-apiserver")},
		Data:       map[string]string{EgressSelectorKey: EgressSelector},
	}
}

// withKonnectivity adds the proxy server to the API server's Pods: the
// API server's egress selector, the shared socket volume and the proxy
// server container, which takes agents (client certificates of the
// konnectivity CA only) on the agent port. Agents connect until they
// hold a tunnel to each of serverCount servers.
func withKonnectivity(d *appsv1.Deployment, image string, serverCount int32) {
	spec := &d.Spec.Template.Spec
	socketVol := corev1.Volume{Name: "konnectivity-socket", VolumeSource: corev1.VolumeSource{
		EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}}
	egressVol := corev1.Volume{Name: "egress-selector", VolumeSource: corev1.VolumeSource{
		ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: EgressSelectorConfigMap}}}}
	socketMount := corev1.VolumeMount{Name: socketVol.Name, MountPath: "/run/konnectivity"}
	api := &spec.Containers[0]
	api.Command = append(api.Command, "--egress-selector-config-file="+konnectivityDir+EgressSelectorKey)
	api.VolumeMounts = append(api.VolumeMounts, socketMount,
		corev1.VolumeMount{Name: egressVol.Name, MountPath: konnectivityDir + EgressSelectorKey, SubPath: EgressSelectorKey, ReadOnly: true})

	const d2 = konnectivityDir + "agents/"
	vols, mnts := mounts("konnectivity", []secretFile{
		{hc.KonnectivityServerSecret, corev1.TLSCertKey, d2 + "tls.crt"}, {hc.KonnectivityServerSecret, corev1.TLSPrivateKeyKey, d2 + "tls.key"},
		pkiFile(hc.Cert(hc.KonnectivityCAKey), d2+"ca.crt"),
	})
	proxy := corev1.Container{
		Name: konnectivityContainer, Image: image,
		Command: []string{"/usr/bin/proxy-server",
			"--mode=grpc", "--uds-name=" + konnectivitySocket, "--delete-existing-uds-file=true", "--server-port=0",
			fmt.Sprintf("--agent-port=%d", hc.KonnectivityAgentPort),
			"--cluster-cert=" + d2 + "tls.crt", "--cluster-key=" + d2 + "tls.key", "--cluster-ca-cert=" + d2 + "ca.crt",
			fmt.Sprintf("--health-port=%d", konnectivityHealthPort),
			fmt.Sprintf("--server-count=%d", serverCount),
			// A connection to a node goes to that node's agent; anything
			// else (Pod and Service addresses) to any agent.
			"--proxy-strategies=destHost,default",
			// Agents dial through the infrastructure's Service NAT: a lost
			// one is noticed in a minute, not an hour.
			"--keepalive-time=30s",
			// Its default (4) logs every packet.
			"--v=1",
		},
		Ports: []corev1.ContainerPort{{Name: "agent", ContainerPort: hc.KonnectivityAgentPort}},
		// Not ready without agents (its /readyz), so liveness only: the API
		// server must serve before any worker exists.
		LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz",
			Port: intstr.FromInt32(konnectivityHealthPort)}}, PeriodSeconds: 10, TimeoutSeconds: 5, FailureThreshold: 6},
		VolumeMounts:    append(mnts, socketMount),
		SecurityContext: podsecurity.Container(),
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("32Mi")}},
	}
	spec.Containers = append(spec.Containers, proxy)
	spec.Volumes = append(spec.Volumes, vols...)
	spec.Volumes = append(spec.Volumes, socketVol, egressVol)
}
