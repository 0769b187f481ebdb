package hostedcluster

import (
	"context"
	"fmt"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tekvirt/tekvirt/catalog"
	hc "github.com/tekvirt/tekvirt/contracts/hostedcluster"
	"github.com/tekvirt/tekvirt/controllers/nodepool"
)

// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;create;update

// WorkerPolicy is the NetworkPolicy, named as HyperShift names its own,
// that keeps the workers of a hosted cluster to themselves.
const WorkerPolicy = "virt-launcher"

// workerPolicy admits to the workers (the launcher Pods of every NodePool
// of the cluster) what the hosted cluster needs and nothing else: anything
// from the control-plane namespace (the other workers - the pod network's
// tunnel, node ports, kubelets - and the hosted API server, which dials
// kubelets), and the hosted node ports from anywhere (the infrastructure's
// load balancers and default ingress forward to them). Another hosted
// cluster's workers, or any other Pod, reach neither a worker's kubelet
// nor its tunnel: one cluster cannot inject packets into another's pod
// network, even where their Pod CIDRs overlap. Egress stays open, as any
// tenant Pod's.
func workerPolicy(cluster *hyperv1.HostedCluster, cpNS string) *networkingv1.NetworkPolicy {
	nodePorts := func(p corev1.Protocol) networkingv1.NetworkPolicyPort {
		return networkingv1.NetworkPolicyPort{Protocol: ptr.To(p), Port: ptr.To(intstr.FromInt32(hc.NodePortMin)), EndPort: ptr.To(int32(hc.NodePortMax))}
	}
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: cpNS, Name: WorkerPolicy,
			Labels:      map[string]string{catalog.ManagedByLabel: catalog.ManagedBy},
			Annotations: map[string]string{hc.ClusterAnnotation: cluster.Namespace + "/" + cluster.Name}},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: nodepool.PoolLabel, Operator: metav1.LabelSelectorOpExists}}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{
				{From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{}}}},
				{Ports: []networkingv1.NetworkPolicyPort{nodePorts(corev1.ProtocolTCP), nodePorts(corev1.ProtocolUDP)}},
			},
		},
	}
}

// ensureNetworkPolicy makes the workers' NetworkPolicy, or puts back its
// spec when it was changed (read uncached: the manager watches no
// NetworkPolicies; an available cluster is looked at every healthInterval).
func (r *Reconciler) ensureNetworkPolicy(ctx context.Context, cluster *hyperv1.HostedCluster, cpNS string) error {
	want := workerPolicy(cluster, cpNS)
	got := &networkingv1.NetworkPolicy{}
	err := r.Reader.Get(ctx, client.ObjectKeyFromObject(want), got)
	switch {
	case apierrors.IsNotFound(err):
		if err := r.Create(ctx, want); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating NetworkPolicy %s/%s: %w", cpNS, want.Name, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("reading NetworkPolicy %s/%s: %w", cpNS, want.Name, err)
	}
	if equality.Semantic.DeepEqual(got.Spec, want.Spec) {
		return nil
	}
	got.Spec = want.Spec
	if err := r.Update(ctx, got); err != nil {
		return fmt.Errorf("restoring NetworkPolicy %s/%s: %w", cpNS, want.Name, err)
	}
	return nil
}
