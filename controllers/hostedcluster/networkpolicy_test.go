package hostedcluster

import (
	"context"
	"testing"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hc "github.com/tekvirt/tekvirt/contracts/hostedcluster"
	"github.com/tekvirt/tekvirt/controllers/nodepool"
	"github.com/tekvirt/tekvirt/controllers/testenv"
)

// TestWorkerPolicySelects: the policy selects the launcher Pods of every
// pool's workers and nothing else of the control plane.
func TestWorkerPolicySelects(t *testing.T) {
	p := workerPolicy(&hyperv1.HostedCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "clusters", Name: "a"}}, "clusters-a")
	sel, err := metav1.LabelSelectorAsSelector(&p.Spec.PodSelector)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   bool
	}{
		{"a worker's launcher Pod", map[string]string{"kubevirt.io": "virt-launcher", nodepool.PoolLabel: "a", nodepool.PoolNamespaceLabel: "clusters"}, true},
		{"a worker of a second pool", map[string]string{nodepool.PoolLabel: "b"}, true},
		{"the API server", map[string]string{hc.ComponentLabel: "kube-apiserver"}, false},
		{"etcd", map[string]string{"app": "etcd"}, false},
		{"a task's Pod", map[string]string{"tekton.dev/taskRun": "x"}, false},
	} {
		if got := sel.Matches(labels.Set(tc.labels)); got != tc.want {
			t.Errorf("%s: selected %v, want %v", tc.name, got, tc.want)
		}
	}
	if len(p.Spec.PolicyTypes) != 1 || p.Spec.PolicyTypes[0] != networkingv1.PolicyTypeIngress {
		t.Errorf("policy types %v, want Ingress only (egress stays open)", p.Spec.PolicyTypes)
	}
}

// TestWorkerPolicyOnAPIServer: the API server takes the policy as made
// (ports with endPort), and a changed spec is put back.
func TestWorkerPolicyOnAPIServer(t *testing.T) {
	cfg := testenv.Start(t)
	c := testenv.Client(t, cfg, corev1.AddToScheme, networkingv1.AddToScheme)
	ctx := context.Background()
	const cpNS = "clusters-a"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: cpNS}}); err != nil {
		t.Fatal(err)
	}
	r := &Reconciler{Client: c, Reader: c}
	cluster := &hyperv1.HostedCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "clusters", Name: "a"}}
	if err := r.ensureNetworkPolicy(ctx, cluster, cpNS); err != nil {
		t.Fatal(err)
	}
	got := &networkingv1.NetworkPolicy{}
	key := client.ObjectKey{Namespace: cpNS, Name: WorkerPolicy}
	if err := c.Get(ctx, key, got); err != nil {
		t.Fatal(err)
	}
	tcp := got.Spec.Ingress[1].Ports[0]
	if *tcp.Port != intstr.FromInt32(30000) || ptr.Deref(tcp.EndPort, 0) != 32767 {
		t.Errorf("node ports %v-%v, want 30000-32767", tcp.Port, tcp.EndPort)
	}
	// A hand-widened policy (every port from anywhere) is narrowed again.
	got.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{}}
	if err := c.Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	if err := r.ensureNetworkPolicy(ctx, cluster, cpNS); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, key, got); err != nil {
		t.Fatal(err)
	}
	if want := workerPolicy(cluster, cpNS).Spec; !equality.Semantic.DeepEqual(got.Spec, want) {
		t.Errorf("policy after restore:\n%+v\nwant\n%+v", got.Spec, want)
	}
}
