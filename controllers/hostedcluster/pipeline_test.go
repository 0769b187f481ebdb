package hostedcluster

import (
	"strings"
	"testing"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	"github.com/openshift/hypershift/api/util/ipnet"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func cluster() *hyperv1.HostedCluster {
	class := "fast"
	size := resource.MustParse("4Gi")
	return &hyperv1.HostedCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: "clusters", Name: "demo", UID: "5e2b"},
		Spec: hyperv1.HostedClusterSpec{
			Release:                      hyperv1.Release{Image: "reg/tekvirt/hosted-release@sha256:1"},
			PullSecret:                   corev1.LocalObjectReference{Name: "demo-pull-secret"},
			DNS:                          hyperv1.DNSSpec{BaseDomain: "example.com"},
			Platform:                     hyperv1.PlatformSpec{Type: hyperv1.KubevirtPlatform},
			ControllerAvailabilityPolicy: hyperv1.SingleReplica,
			Networking: hyperv1.ClusterNetworking{
				ServiceNetwork: []hyperv1.ServiceNetworkEntry{{CIDR: *ipnet.MustParseCIDR("172.30.0.0/16")}},
				ClusterNetwork: []hyperv1.ClusterNetworkEntry{{CIDR: *ipnet.MustParseCIDR("10.128.0.0/14")}},
			},
			Etcd: hyperv1.EtcdSpec{ManagementType: hyperv1.Managed, Managed: &hyperv1.ManagedEtcdSpec{Storage: hyperv1.ManagedEtcdStorageSpec{
				Type: hyperv1.PersistentVolumeEtcdStorage, PersistentVolume: &hyperv1.PersistentVolumeEtcdStorageSpec{StorageClassName: &class, Size: &size}}}},
			Services: []hyperv1.ServicePublishingStrategyMapping{
				{Service: hyperv1.APIServer, ServicePublishingStrategy: hyperv1.ServicePublishingStrategy{Type: hyperv1.LoadBalancer}},
			},
		},
	}
}

func TestParams(t *testing.T) {
	got := map[string]string{}
	for _, p := range Params(cluster(), Env{LocalRegistry: "10.96.0.11:5000", LocalRegistryHost: "127.0.0.1:5000", CoreDNSImage: "reg/coredns@sha256:2", RouterImage: "reg/router@sha256:3",
		KonnectivityAgentImage: "reg/konnectivity-agent@sha256:4"}) {
		got[p.Name] = p.Value.StringVal
	}
	want := map[string]string{
		"clusterName": "demo", "clusterNamespace": "clusters", "clusterUID": "5e2b", "controlPlaneNamespace": "clusters-demo",
		"pullSecretName": "demo-pull-secret",
		"releaseImage":   "reg/tekvirt/hosted-release@sha256:1", "replicas": "1",
		"etcdStorageClassName": "fast", "etcdStorageSize": "4Gi",
		"serviceCIDR": "172.30.0.0/16", "clusterCIDR": "10.128.0.0/14", "apiServerServiceType": "LoadBalancer", "localRegistry": "10.96.0.11:5000", "localRegistryHost": "127.0.0.1:5000", "corednsImage": "reg/coredns@sha256:2",
		"routerImage": "reg/router@sha256:3", "ingressDomain": "apps.demo.example.com", "konnectivityAgentImage": "reg/konnectivity-agent@sha256:4",
		"routerReplicas": "1",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("param %s = %q, want %q", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("params %v", got)
	}
	noDomain := cluster()
	noDomain.Spec.DNS.BaseDomain = ""
	for _, p := range Params(noDomain, Env{}) {
		if p.Name == "ingressDomain" && p.Value.StringVal != "apps.demo.internal" {
			t.Errorf("without a base domain: ingressDomain %q, want apps.demo.internal", p.Value.StringVal)
		}
	}
	ha := cluster()
	ha.Spec.ControllerAvailabilityPolicy = hyperv1.HighlyAvailable
	ha.Spec.InfrastructureAvailabilityPolicy = hyperv1.HighlyAvailable
	ha.Spec.Etcd.Managed = nil
	ha.Spec.Services = nil
	for _, p := range Params(ha, Env{}) {
		switch p.Name {
		case "replicas":
			if p.Value.StringVal != "3" {
				t.Errorf("HighlyAvailable: replicas %q", p.Value.StringVal)
			}
		case "routerReplicas":
			if p.Value.StringVal != "2" {
				t.Errorf("infrastructure HighlyAvailable: routerReplicas %q", p.Value.StringVal)
			}
		case "etcdStorageSize":
			if p.Value.StringVal != "8Gi" {
				t.Errorf("default etcd size %q", p.Value.StringVal)
			}
		case "apiServerServiceType":
			if p.Value.StringVal != string(corev1.ServiceTypeClusterIP) {
				t.Errorf("no APIServer strategy: %q", p.Value.StringVal)
			}
		}
	}
}

func TestRunNameFollowsTheSpec(t *testing.T) {
	a := RunName(Params(cluster(), Env{}))
	if a != RunName(Params(cluster(), Env{})) {
		t.Error("the same spec named two runs")
	}
	if !strings.HasPrefix(a, PipelineName+"-") || len(a) > 63 {
		t.Errorf("run name %q", a)
	}
	other := cluster()
	other.Spec.Release.Image = "reg/tekvirt/hosted-release@sha256:2"
	if RunName(Params(other, Env{})) == a {
		t.Error("a new release image kept the old run")
	}
}

func TestPipelineRun(t *testing.T) {
	pr, err := PipelineRun(cluster(), Env{StepImage: "reg/step@sha256:1", LocalRegistry: "10.96.0.11:5000"})
	if err != nil {
		t.Fatal(err)
	}
	if pr.Namespace != "clusters-demo" || pr.Labels[ClusterNameLabel] != "demo" || pr.Labels[ClusterNamespaceLabel] != "clusters" {
		t.Errorf("run %s/%s labels %v", pr.Namespace, pr.Name, pr.Labels)
	}
	if pr.Spec.TaskRunTemplate.ServiceAccountName != "provision-hosted-cluster-pipeline" {
		t.Errorf("service account %q", pr.Spec.TaskRunTemplate.ServiceAccountName)
	}
	if pr.Spec.PipelineSpec == nil || len(pr.Spec.PipelineSpec.Tasks) != 6 {
		t.Fatalf("pipeline spec %+v", pr.Spec.PipelineSpec)
	}
}

// TestLocalRegistry: KEP-1755's ConfigMap names the registry the cluster
// network reaches (hostFromClusterNetwork, else host); none without it.
func TestLocalRegistry(t *testing.T) {
	for _, tc := range []struct {
		name       string
		data       map[string]string
		addr, host string
		err        bool
	}{
		{"kind's", map[string]string{"localRegistryHosting.v1": "host: \"localhost:5001\"\nhostFromClusterNetwork: \"kind-registry:5000\"\n"}, "kind-registry:5000", "localhost:5001", false},
		{"host only", map[string]string{"localRegistryHosting.v1": "host: \"10.96.0.11:5000\"\n"}, "10.96.0.11:5000", "10.96.0.11:5000", false},
		{"none", map[string]string{}, "", "", false},
		{"malformed", map[string]string{"localRegistryHosting.v1": "host: [\n"}, "", "", true},
	} {
		addr, host, err := LocalRegistry(tc.data)
		if addr != tc.addr || host != tc.host || (err != nil) != tc.err {
			t.Errorf("%s: %q %q, %v; want %q %q, error %v", tc.name, addr, host, err, tc.addr, tc.host, tc.err)
		}
	}
	pr, err := PipelineRun(cluster(), Env{StepImage: "reg/step@sha256:1", LocalRegistry: "10.96.0.11:5000"})
	if err != nil {
		t.Fatal(err)
	}
	got := ""
	for _, p := range pr.Spec.Params {
		if p.Name == "localRegistry" {
			got = p.Value.StringVal
		}
	}
	if got != "10.96.0.11:5000" {
		t.Errorf("the run's localRegistry param: %q", got)
	}
}
