package e2e

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	"github.com/openshift/hypershift/api/util/ipnet"

	"github.com/tekvirt/tekvirt/e2e/framework"
)

// hostedCluster is a HostedCluster of the KubeVirt platform with the
// fields HyperShift requires.
func hostedCluster(ns, name string) *hyperv1.HostedCluster {
	route := hyperv1.ServicePublishingStrategy{Type: hyperv1.Route}
	return &hyperv1.HostedCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: hyperv1.HostedClusterSpec{
			Release:    hyperv1.Release{Image: "127.0.0.1:5000/tekvirt/hosted-release:latest"},
			PullSecret: corev1.LocalObjectReference{Name: name + "-pull-secret"},
			Platform:   hyperv1.PlatformSpec{Type: hyperv1.KubevirtPlatform},
			// A typed client sends etcd whole, so the CRD's default for it
			// does not apply.
			Etcd: hyperv1.EtcdSpec{ManagementType: hyperv1.Managed, Managed: &hyperv1.ManagedEtcdSpec{
				Storage: hyperv1.ManagedEtcdStorageSpec{Type: hyperv1.PersistentVolumeEtcdStorage}}},
			Networking: hyperv1.ClusterNetworking{
				ClusterNetwork: []hyperv1.ClusterNetworkEntry{{CIDR: *ipnet.MustParseCIDR("10.132.0.0/14")}},
				ServiceNetwork: []hyperv1.ServiceNetworkEntry{{CIDR: *ipnet.MustParseCIDR("172.31.0.0/16")}},
			},
			Services: []hyperv1.ServicePublishingStrategyMapping{
				{Service: hyperv1.APIServer, ServicePublishingStrategy: hyperv1.ServicePublishingStrategy{Type: hyperv1.LoadBalancer}},
				{Service: hyperv1.OAuthServer, ServicePublishingStrategy: route},
				{Service: hyperv1.Konnectivity, ServicePublishingStrategy: route},
				{Service: hyperv1.Ignition, ServicePublishingStrategy: route},
			},
		},
	}
}

// nodePool is a NodePool of two 1-core workers for cluster.
func nodePool(ns, name, cluster string) *hyperv1.NodePool {
	size := resource.MustParse("4Gi")
	mem := resource.MustParse("1Gi")
	return &hyperv1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: hyperv1.NodePoolSpec{
			ClusterName: cluster,
			Replicas:    ptr(int32(2)),
			Management:  hyperv1.NodePoolManagement{UpgradeType: hyperv1.UpgradeTypeReplace},
			Release:     hyperv1.Release{Image: "127.0.0.1:5000/tekvirt/hosted-release:latest"},
			Platform: hyperv1.NodePoolPlatform{Type: hyperv1.KubevirtPlatform, Kubevirt: &hyperv1.KubevirtNodePoolPlatform{
				Compute:    &hyperv1.KubevirtCompute{Cores: ptr(uint32(1)), Memory: &mem},
				RootVolume: &hyperv1.KubevirtRootVolume{KubevirtVolume: hyperv1.KubevirtVolume{Type: hyperv1.KubevirtVolumeTypePersistent, Persistent: &hyperv1.KubevirtPersistentVolume{Size: &size}}},
			}},
		},
	}
}

// TestHyperShiftAdmission: HostedCluster and NodePool of the KubeVirt
// platform are served (CRDs from HyperShift's Go types) and admitted with
// the CRD's defaults; another platform, or a field tekvirt does not
// implement, or a control-plane namespace at Pod Security privileged, is
// refused naming the field, and nothing is stored; namespace
// editors (of this namespace or another) may create none.
func TestHyperShiftAdmission(t *testing.T) {
	f := framework.New(t)
	ns := f.Namespace(t)
	c := f.VMClient(t)
	ctx := context.Background()
	hc := hostedCluster(ns, "admitted")
	if err := c.Create(ctx, hc); err != nil {
		t.Fatalf("a KubeVirt HostedCluster refused: %v", err)
	}
	if hc.Spec.Networking.NetworkType != hyperv1.OVNKubernetes || hc.Spec.ControllerAvailabilityPolicy != hyperv1.HighlyAvailable {
		t.Errorf("the CRD's defaults were not applied: networkType %q, controllerAvailabilityPolicy %q", hc.Spec.Networking.NetworkType, hc.Spec.ControllerAvailabilityPolicy)
	}
	if err := c.Create(ctx, nodePool(ns, "admitted", "admitted")); err != nil {
		t.Fatalf("a KubeVirt NodePool refused: %v", err)
	}

	other := hostedCluster(ns, "none")
	other.Spec.Platform = hyperv1.PlatformSpec{Type: hyperv1.NonePlatform}
	if err := c.Create(ctx, other); err == nil || !strings.Contains(err.Error(), `spec.platform.type: "None"`) {
		t.Errorf("another platform: %v, want refused naming spec.platform.type", err)
	}
	passthrough := hostedCluster(ns, "passthrough")
	passthrough.Spec.Platform.Kubevirt = &hyperv1.KubevirtPlatformSpec{BaseDomainPassthrough: ptr(true)}
	if err := c.Create(ctx, passthrough); err == nil || !strings.Contains(err.Error(), "spec.platform.kubevirt.baseDomainPassthrough") {
		t.Errorf("a field tekvirt does not implement: %v, want refused naming spec.platform.kubevirt.baseDomainPassthrough", err)
	}
	privileged := hostedCluster(ns, "privileged")
	privileged.Annotations = map[string]string{hyperv1.PodSecurityAdmissionLabelOverrideAnnotation: "Privileged"}
	if err := c.Create(ctx, privileged); err == nil || !strings.Contains(err.Error(), hyperv1.PodSecurityAdmissionLabelOverrideAnnotation) {
		t.Errorf("a control plane asking for Pod Security privileged: %v, want refused naming the annotation", err)
	}
	both := nodePool(ns, "both", "admitted")
	both.Spec.AutoScaling = &hyperv1.NodePoolAutoScaling{Min: 1, Max: 3}
	// HyperShift's CRD refuses it already (so does tekvirt's webhook).
	if err := c.Create(ctx, both); err == nil || !strings.Contains(err.Error(), "autoScaling") {
		t.Errorf("replicas and autoScaling: %v, want refused naming autoScaling", err)
	}
	// Namespace users have no HyperShift rights: an editor of this
	// namespace, or of another, may create no HostedCluster or NodePool
	// here (a NodePool would make worker VMs from the control plane's
	// bootstrap token).
	otherNS := f.Namespace(t)
	bindUser(t, f, ns, "e2e-editor", "edit")
	bindUser(t, f, otherNS, "e2e-other-editor", "edit")
	for _, user := range []string{"e2e-editor", "e2e-other-editor"} {
		for kind, resource := range map[string]string{"HostedCluster": "hostedclusters", "NodePool": "nodepools"} {
			err := clientsetAs(t, f, user).Discovery().RESTClient().Post().AbsPath("/apis/hypershift.openshift.io/v1beta1/namespaces", ns, resource).
				Body([]byte(`{"apiVersion":"hypershift.openshift.io/v1beta1","kind":"`+kind+`","metadata":{"name":"by-`+user+`"}}`)).
				SetHeader("Content-Type", "application/json").Do(ctx).Error()
			if !apierrors.IsForbidden(err) {
				t.Errorf("a %s created by %s: %v, want 403", kind, user, err)
			}
		}
	}
	var list hyperv1.HostedClusterList
	if err := c.List(ctx, &list); err != nil {
		t.Fatal(err)
	}
	for _, h := range list.Items {
		if h.Namespace == ns && h.Name != "admitted" {
			t.Errorf("refused HostedCluster %s stored", h.Name)
		}
	}
}

// TestCreateClusterKubevirt: `tekvirt create cluster kubevirt` with hcp's
// flags refuses an unknown StorageClass before creating anything, naming
// the flag; with good flags it creates the pull secret, HostedCluster and
// NodePool, which admission takes; `destroy cluster kubevirt` removes them.
func TestCreateClusterKubevirt(t *testing.T) {
	f := framework.New(t)
	ns := f.Namespace(t)
	c := f.VMClient(t)
	ctx := context.Background()
	pullSecret := pullSecretFile(t)
	args := []string{"create", "cluster", "kubevirt", "--name", "hosted", "--namespace", ns, "--pull-secret", pullSecret,
		"--release-image", "127.0.0.1:5000/tekvirt/hosted-release:latest", "--node-pool-replicas", "2", "--cores", "1", "--memory", "1Gi",
		"--root-volume-size", "4", "--root-volume-cache-strategy", "PVC", "--control-plane-availability-policy", "SingleReplica",
		"--host-device-name", "nvidia.com/A100,count:1"}
	cmd := exec.Command(f.Bin("tekvirt"), append(args, "--etcd-storage-class", "no-such-class")...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+f.Kubeconfig)
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "--etcd-storage-class") {
		t.Errorf("an unknown StorageClass: %v %s, want refused naming --etcd-storage-class", err, out)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "hosted"}, &hyperv1.HostedCluster{}); !apierrors.IsNotFound(err) {
		t.Errorf("a HostedCluster was created despite the bad flag: %v", err)
	}
	out := tekvirt(t, f, args...)
	for _, want := range []string{"HostedCluster " + ns + "/hosted created", "NodePool " + ns + "/hosted created", "Secret " + ns + "/hosted-pull-secret created"} {
		if !strings.Contains(out, want) {
			t.Errorf("create cluster kubevirt output lacks %q:\n%s", want, out)
		}
	}
	np := &hyperv1.NodePool{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "hosted"}, np); err != nil || *np.Spec.Replicas != 2 ||
		np.Spec.Platform.Kubevirt.RootVolume.CacheStrategy.Type != hyperv1.KubevirtCachingStrategyPVC || len(np.Spec.Platform.Kubevirt.KubevirtHostDevices) != 1 {
		t.Errorf("NodePool as created: %v %+v", err, np.Spec)
	}
	out = tekvirt(t, f, "destroy", "cluster", "kubevirt", "--name", "hosted", "--namespace", ns)
	for _, obj := range []client.Object{&hyperv1.HostedCluster{}, &hyperv1.NodePool{}} {
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "hosted"}, obj); !apierrors.IsNotFound(err) {
			t.Errorf("%T left after destroy (%v):\n%s", obj, err, out)
		}
	}
}
