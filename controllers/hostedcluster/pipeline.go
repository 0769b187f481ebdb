package hostedcluster

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	pipelinev1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"knative.dev/pkg/apis"

	"github.com/tekvirt/tekvirt/catalog"
	hc "github.com/tekvirt/tekvirt/contracts/hostedcluster"
)

// PipelineName is the catalog pipeline that provisions a control plane.
const PipelineName = "provision-hosted-cluster"

// Labels on each provisioning PipelineRun naming its HostedCluster.
const (
	ClusterNameLabel      = "tekvirt.io/hosted-cluster-name"
	ClusterNamespaceLabel = "tekvirt.io/hosted-cluster-namespace"
)

// Env is what a provisioning run takes from the infrastructure besides
// the HostedCluster.
type Env struct {
	// StepImage runs the catalog tasks' steps.
	StepImage string
	// LocalRegistry is the infrastructure's local registry (LocalRegistry),
	// which the workers pull from over plain HTTP; "" when none.
	// LocalRegistryHost is the name its images carry from the host.
	LocalRegistry, LocalRegistryHost string
	// CoreDNSImage is the hosted cluster DNS's image, RouterImage its
	// default router's, KonnectivityAgentImage its workers' Konnectivity
	// agent's.
	CoreDNSImage, RouterImage, KonnectivityAgentImage string
}

// Params are the pipeline's params for cluster in env, in a stable order.
func Params(cluster *hyperv1.HostedCluster, env Env) pipelinev1.Params {
	s := cluster.Spec
	replicas := 1
	if s.ControllerAvailabilityPolicy == hyperv1.HighlyAvailable {
		replicas = 3
	}
	etcdClass, etcdSize := "", hyperv1.DefaultPersistentVolumeEtcdStorageSize.String()
	if m := s.Etcd.Managed; m != nil && m.Storage.PersistentVolume != nil {
		if pv := m.Storage.PersistentVolume; pv.StorageClassName != nil {
			etcdClass = *pv.StorageClassName
		}
		if pv := m.Storage.PersistentVolume; pv.Size != nil {
			etcdSize = pv.Size.String()
		}
	}
	// The hosted cluster's own infrastructure services, the router among
	// them, follow infrastructureAvailabilityPolicy (SingleReplica by
	// default), as OpenShift's ingress operator does.
	routerReplicas := 1
	if s.InfrastructureAvailabilityPolicy == hyperv1.HighlyAvailable {
		routerReplicas = 2
	}
	serviceCIDR, clusterCIDR := "172.31.0.0/16", "10.132.0.0/14"
	if n := s.Networking.ServiceNetwork; len(n) > 0 {
		serviceCIDR = n[0].CIDR.String()
	}
	if n := s.Networking.ClusterNetwork; len(n) > 0 {
		clusterCIDR = n[0].CIDR.String()
	}
	str := func(name, v string) pipelinev1.Param {
		return pipelinev1.Param{Name: name, Value: *pipelinev1.NewStructuredValues(v)}
	}
	return pipelinev1.Params{
		str("clusterName", cluster.Name),
		str("clusterNamespace", cluster.Namespace),
		str("clusterUID", string(cluster.UID)),
		str("pullSecretName", s.PullSecret.Name),
		str("controlPlaneNamespace", hc.ControlPlaneNamespace(cluster.Namespace, cluster.Name)),
		str("releaseImage", s.Release.Image),
		str("replicas", strconv.Itoa(replicas)),
		str("etcdStorageClassName", etcdClass),
		str("etcdStorageSize", etcdSize),
		str("serviceCIDR", serviceCIDR),
		str("clusterCIDR", clusterCIDR),
		str("apiServerServiceType", string(APIServerServiceType(cluster))),
		str("localRegistry", env.LocalRegistry),
		str("localRegistryHost", env.LocalRegistryHost),
		str("corednsImage", env.CoreDNSImage),
		str("routerImage", env.RouterImage),
		str("ingressDomain", hc.IngressDomain(cluster.Name, s.DNS.BaseDomain)),
		str("routerReplicas", strconv.Itoa(routerReplicas)),
		str("konnectivityAgentImage", env.KonnectivityAgentImage),
	}
}

// APIServerServiceType follows the APIServer publishing strategy:
// LoadBalancer and NodePort as asked; anything else (Route has no meaning
// off OpenShift) a ClusterIP, reachable from the infrastructure cluster.
func APIServerServiceType(cluster *hyperv1.HostedCluster) corev1.ServiceType {
	for _, m := range cluster.Spec.Services {
		if m.Service != hyperv1.APIServer {
			continue
		}
		switch m.Type {
		case hyperv1.LoadBalancer:
			return corev1.ServiceTypeLoadBalancer
		case hyperv1.NodePort:
			return corev1.ServiceTypeNodePort
		}
	}
	return corev1.ServiceTypeClusterIP
}

// RunName is the PipelineRun for params: a new spec gets a new run, the
// same spec keeps its run (successful or not).
func RunName(params pipelinev1.Params) string {
	h := sha256.New()
	for _, p := range params {
		fmt.Fprintf(h, "%s=%s\n", p.Name, p.Value.StringVal)
	}
	return PipelineName + "-" + hex.EncodeToString(h.Sum(nil))[:10]
}

// PipelineRun is the provisioning run of cluster in env, with the catalog
// pipeline inlined (its tasks' step image env.StepImage), run by the
// pipeline's ServiceAccount in the control-plane namespace.
func PipelineRun(cluster *hyperv1.HostedCluster, env Env) (*pipelinev1.PipelineRun, error) {
	spec, err := catalog.InlinePipeline(PipelineName, env.StepImage)
	if err != nil {
		return nil, err
	}
	sa, err := serviceAccount()
	if err != nil {
		return nil, err
	}
	params := Params(cluster, env)
	return &pipelinev1.PipelineRun{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: hc.ControlPlaneNamespace(cluster.Namespace, cluster.Name), Name: RunName(params),
			Labels: map[string]string{ClusterNameLabel: cluster.Name, ClusterNamespaceLabel: cluster.Namespace,
				catalog.ManagedByLabel: catalog.ManagedBy},
		},
		Spec: pipelinev1.PipelineRunSpec{
			PipelineSpec:    spec,
			Params:          params,
			TaskRunTemplate: pipelinev1.PipelineTaskRunTemplate{ServiceAccountName: sa},
		},
	}, nil
}

// serviceAccount is the provisioning pipeline's ServiceAccount name.
func serviceAccount() (string, error) {
	p, err := pipeline()
	if err != nil {
		return "", err
	}
	return p.ServiceAccount(), nil
}

func pipeline() (catalog.Pipeline, error) {
	ps, err := catalog.Pipelines()
	if err != nil {
		return catalog.Pipeline{}, err
	}
	for _, p := range ps {
		if p.Name == PipelineName {
			return p, nil
		}
	}
	return catalog.Pipeline{}, fmt.Errorf("the catalog has no %s pipeline", PipelineName)
}

// RunOf is what the status needs of pr.
func RunOf(pr *pipelinev1.PipelineRun) *Run {
	run := &Run{Name: pr.Name, Message: "pending"}
	if pr.Status.StartTime != nil {
		run.Started = *pr.Status.StartTime
	} else {
		run.Started = pr.CreationTimestamp
	}
	if pr.Status.CompletionTime != nil {
		run.Completed = *pr.Status.CompletionTime
	}
	c := pr.Status.GetCondition(apis.ConditionSucceeded)
	if c == nil {
		return run
	}
	run.Message = c.Message
	run.Done = c.Status != corev1.ConditionUnknown
	run.Succeeded = c.Status == corev1.ConditionTrue
	for _, r := range pr.Status.Results {
		if r.Name == "version" {
			run.Version = r.Value.StringVal
		}
	}
	return run
}
