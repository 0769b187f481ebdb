package bench

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/tekvirt/tekvirt/controllers/nodepool"
	"github.com/tekvirt/tekvirt/e2e/framework"
)

// hostedBench is a hosted cluster under measurement.
type hostedBench struct {
	t      *testing.T
	f      *framework.Framework
	c      client.Client
	ns, cp string
	hosted kubernetes.Interface
}

func (b *hostedBench) tekvirt(args ...string) {
	b.t.Helper()
	cmd := exec.Command(b.f.Bin("tekvirt"), args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+b.f.Kubeconfig)
	if out, err := cmd.CombinedOutput(); err != nil {
		b.t.Fatalf("tekvirt %v: %v\n%s", args, err, out)
	}
}

// connect makes b.hosted, a client of hosted cluster name as its admin,
// once its admin kubeconfig is there.
func (b *hostedBench) connect(name string) error {
	if b.hosted != nil {
		return nil
	}
	kc, err := b.f.Kube.CoreV1().Secrets(b.ns).Get(context.Background(), name+"-admin-kubeconfig", metav1.GetOptions{})
	if err != nil {
		return err
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kc.Data["kubeconfig"])
	if err != nil {
		return err
	}
	b.hosted, err = kubernetes.NewForConfig(cfg)
	return err
}

// readyNodes counts the hosted cluster's Ready nodes among names.
func (b *hostedBench) readyNodes(names []string) int {
	n := 0
	for _, name := range names {
		node, err := b.hosted.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			continue
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				n++
			}
		}
	}
	return n
}

// workers are the pool's VMs.
func (b *hostedBench) workers(pool string) []v1.VirtualMachine {
	vms := &v1.VirtualMachineList{}
	if err := b.c.List(context.Background(), vms, client.InNamespace(b.cp), client.MatchingLabels{nodepool.PoolLabel: pool}); err != nil {
		b.t.Fatal(err)
	}
	return vms.Items
}

func names(vms []v1.VirtualMachine) []string {
	var out []string
	for _, vm := range vms {
		out = append(out, vm.Name)
	}
	return out
}

// phases polls every second until done, noting when each named check
// first holds.
func phases(t *testing.T, timeout time.Duration, checks []string, holds func(string) bool) map[string]time.Duration {
	t.Helper()
	start, seen := time.Now(), map[string]time.Duration{}
	for len(seen) < len(checks) {
		if time.Since(start) > timeout {
			t.Fatalf("after %s only %v", timeout, seen)
		}
		for _, c := range checks {
			if _, ok := seen[c]; !ok && holds(c) {
				seen[c] = time.Since(start).Round(time.Second)
			}
		}
		time.Sleep(time.Second)
	}
	return seen
}

// rootDisk is the time from a worker's root DataVolume's creation to its
// Ready condition, and the bytes its disk.img takes on the node the PV is
// pinned to (-1 if the file is not found there).
func (b *hostedBench) rootDisk(vm string) (time.Duration, int64) {
	b.t.Helper()
	ctx := context.Background()
	dv := &cdiv1.DataVolume{}
	if err := b.c.Get(ctx, client.ObjectKey{Namespace: b.cp, Name: vm + "-rootdisk"}, dv); err != nil {
		b.t.Fatal(err)
	}
	var took time.Duration
	for _, c := range dv.Status.Conditions {
		if c.Type == cdiv1.DataVolumeReady && c.Status == corev1.ConditionTrue {
			took = c.LastTransitionTime.Sub(dv.CreationTimestamp.Time)
		}
	}
	return took, b.diskBytes(dv.Name)
}

// diskBytes is what the disk.img of claim takes on the node its PV is
// pinned to (-1 if the file is not found there).
func (b *hostedBench) diskBytes(claim string) int64 {
	b.t.Helper()
	ctx := context.Background()
	pvc, err := b.f.Kube.CoreV1().PersistentVolumeClaims(b.cp).Get(ctx, claim, metav1.GetOptions{})
	if err != nil {
		b.t.Fatal(err)
	}
	pv, err := b.f.Kube.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil || framework.VolumeDir(pv) == "" {
		return -1
	}
	var st syscall.Stat_t
	if syscall.Stat(filepath.Join(framework.VolumeHostDir(pv), "disk.img"), &st) != nil {
		return -1
	}
	return st.Blocks * 512
}

// TestHostedClusterCreate measures `tekvirt create cluster kubevirt
// --node-pool-replicas 2` (workers of 1 core and 1 GiB, PVC cache) until
// the HostedCluster is Available and both nodes are Ready, split into its
// phases, against the 5-minute target; then the root volume of a worker
// cloned from the cache against one imported without it (time, bytes);
// then an autoscaled scale-up (unschedulable Pod -> new node Ready -> Pod
// Running) against a replicas scale-up of the same pool.
func TestHostedClusterCreate(t *testing.T) {
	f := benchOnly(t)
	ctx := context.Background()
	ns := f.Namespace(t)
	b := &hostedBench{t: t, f: f, c: f.VMClient(t), ns: ns, cp: ns + "-bench"}
	pullSecret := filepath.Join(t.TempDir(), "pull-secret.json")
	if err := os.WriteFile(pullSecret, []byte(`{"auths":{}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	compute := []string{"--memory", "1Gi", "--cores", "1", "--root-volume-size", "1", "--control-plane-availability-policy", "SingleReplica"}
	b.tekvirt(append([]string{"create", "cluster", "kubevirt", "--name", "bench", "--namespace", ns, "--pull-secret", pullSecret,
		"--node-pool-replicas", "2", "--root-volume-cache-strategy", "PVC"}, compute...)...)
	t.Cleanup(func() { b.tekvirt("destroy", "cluster", "kubevirt", "--name", "bench", "--namespace", ns) })
	hc := &hyperv1.HostedCluster{}
	seen := phases(t, 10*time.Minute, []string{"control plane Available", "boot image cached", "2 VMs Running", "2 nodes Ready"}, func(c string) bool {
		switch c {
		case "control plane Available":
			return b.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "bench"}, hc) == nil &&
				meta.IsStatusConditionTrue(hc.Status.Conditions, string(hyperv1.HostedClusterAvailable))
		case "boot image cached":
			np := &hyperv1.NodePool{}
			if b.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "bench"}, np) != nil || np.Status.Platform == nil {
				return false
			}
			dv := &cdiv1.DataVolume{}
			return b.c.Get(ctx, client.ObjectKey{Namespace: b.cp, Name: np.Status.Platform.KubeVirt.CacheName}, dv) == nil && dv.Status.Phase == cdiv1.Succeeded
		case "2 VMs Running":
			vms := b.workers("bench")
			return len(vms) == 2 && vms[0].Status.Ready && vms[1].Status.Ready
		default:
			return b.connect("bench") == nil && b.readyNodes(names(b.workers("bench"))) == 2
		}
	})
	total := seen["2 nodes Ready"]
	t.Logf("create cluster --node-pool-replicas 2: control plane Available %s, boot image cached %s, 2 VMs Running %s, 2 nodes Ready %s",
		seen["control plane Available"], seen["boot image cached"], seen["2 VMs Running"], total)
	t.Logf("total %s: ratio %.2f of the 5-minute target", total, total.Seconds()/300)

	// The same cluster's second pool, without cache: its root volumes are
	// imported from the image each (by node pull).
	np := &hyperv1.NodePool{}
	if err := b.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "bench"}, np); err != nil {
		t.Fatal(err)
	}
	plain := np.DeepCopy()
	plain.ObjectMeta = metav1.ObjectMeta{Namespace: ns, Name: "plain"}
	plain.Spec.Platform.Kubevirt.RootVolume.CacheStrategy = nil
	plain.Spec.Replicas = ptr.To(int32(1))
	plain.Status = hyperv1.NodePoolStatus{}
	start := time.Now()
	if err := b.c.Create(ctx, plain); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(f.Bin("kubectl"), "--kubeconfig", f.Kubeconfig, "-n", ns, "patch", "nodepool", "bench", "--type=merge",
		"-p", `{"spec":{"replicas":3}}`).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	replicasUp := phases(t, 8*time.Minute, []string{"bench", "plain"}, func(pool string) bool {
		want := map[string]int{"bench": 3, "plain": 1}[pool]
		vms := b.workers(pool)
		return len(vms) == want && b.readyNodes(names(vms)) == want
	})
	t.Logf("replicas +1 -> node Ready: cached pool %s, uncached pool (new pool) %s (both at once, from %s)", replicasUp["bench"], replicasUp["plain"], start.Format(time.TimeOnly))
	var cached, imported []time.Duration
	var cachedBytes, importedBytes []int64
	for _, vm := range b.workers("bench") {
		d, n := b.rootDisk(vm.Name)
		cached, cachedBytes = append(cached, d), append(cachedBytes, n)
	}
	for _, vm := range b.workers("plain") {
		d, n := b.rootDisk(vm.Name)
		imported, importedBytes = append(imported, d), append(importedBytes, n)
	}
	t.Logf("root volume create -> Ready: cloned from the cache %v (median %s), imported %v; ratio %.2f",
		cached, median(cached), imported, float64(median(cached))/float64(median(imported)))
	pool := &hyperv1.NodePool{}
	if err := b.c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "bench"}, pool); err != nil {
		t.Fatal(err)
	}
	cacheBytes := int64(-1)
	if p := pool.Status.Platform; p != nil && p.KubeVirt != nil && p.KubeVirt.CacheName != "" {
		cacheBytes = b.diskBytes(p.KubeVirt.CacheName)
	}
	t.Logf("root volume bytes on the node: cloned %v plus the cache's %d once, imported %v (allocated blocks; a clone copies the cache's on a file system without reflink)",
		cachedBytes, cacheBytes, importedBytes)

	// Autoscaled scale-up of the cached pool: min = max - 1 = 3.
	if out, err := exec.Command(f.Bin("kubectl"), "--kubeconfig", f.Kubeconfig, "-n", ns, "patch", "nodepool", "bench", "--type=json", "-p",
		`[{"op":"remove","path":"/spec/replicas"},{"op":"add","path":"/spec/autoScaling","value":{"max":4,"min":3}}]`).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	up := scaleUp(t, b)
	t.Logf("scale-up ratio: autoscaled (Pod pending -> node Ready) %s / replicas +1 (-> node Ready) %s = %.2f",
		up, replicasUp["bench"], up.Seconds()/replicasUp["bench"].Seconds())
}

// scaleUp fills the cached pool's three workers with 600m Pods, one more
// than they hold, and measures the extra Pod's pending -> node Ready ->
// Running; it returns the time until the new node was Ready.
func scaleUp(t *testing.T, b *hostedBench) time.Duration {
	t.Helper()
	ctx := context.Background()
	replicas := int32(4)
	labels := map[string]string{"app": "bench-load"}
	load := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "bench-load"},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
					NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
						Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpNotIn, Values: names(b.workers("plain"))}}}}}}},
				Containers: []corev1.Container{{Name: "pause", Image: "tekvirt.io/pause:latest", ImagePullPolicy: corev1.PullNever,
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("600m")}}}}}}},
	}
	start := time.Now()
	if _, err := b.hosted.AppsV1().Deployments("default").Create(ctx, load, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	before := names(b.workers("bench"))
	seen := phases(t, 8*time.Minute, []string{"new worker", "node Ready", "all Pods Running"}, func(c string) bool {
		now := names(b.workers("bench"))
		added := slices.DeleteFunc(slices.Clone(now), func(n string) bool { return slices.Contains(before, n) })
		switch c {
		case "new worker":
			return len(added) > 0
		case "node Ready":
			return len(added) > 0 && b.readyNodes(added) == len(added)
		default:
			d, err := b.hosted.AppsV1().Deployments("default").Get(ctx, "bench-load", metav1.GetOptions{})
			return err == nil && d.Status.ReadyReplicas == replicas
		}
	})
	t.Logf("autoscaled scale-up from %s: unschedulable Pod -> worker created %s -> node Ready %s -> Pod Running %s",
		start.Format(time.TimeOnly), seen["new worker"], seen["node Ready"], seen["all Pods Running"])
	return seen["node Ready"]
}
