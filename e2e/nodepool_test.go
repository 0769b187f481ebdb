package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"

	"github.com/tekvirt/tekvirt/controllers/nodepool"
	"github.com/tekvirt/tekvirt/e2e/docexample"
	"github.com/tekvirt/tekvirt/e2e/framework"
)

// npCondition is the NodePool's condition of type t, or nil.
func npCondition(np *hyperv1.NodePool, t string) *hyperv1.NodePoolCondition {
	for i := range np.Status.Conditions {
		if np.Status.Conditions[i].Type == t {
			return &np.Status.Conditions[i]
		}
	}
	return nil
}

// waitPool waits until the NodePool is Ready with replicas Ready nodes.
func waitPool(t *testing.T, c client.Client, np *hyperv1.NodePool, replicas int32, timeout time.Duration) {
	t.Helper()
	framework.Eventually(t, timeout, fmt.Sprintf("NodePool %s Ready with %d nodes", np.Name, replicas), func() error {
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(np), np); err != nil {
			return err
		}
		r := npCondition(np, hyperv1.NodePoolReadyConditionType)
		if r == nil || r.Status != corev1.ConditionTrue || np.Status.Replicas != replicas {
			return fmt.Errorf("replicas %d, Ready %+v", np.Status.Replicas, r)
		}
		return nil
	})
}

// poolWorkers are the names of the pool's VMs in the control-plane namespace.
func poolWorkers(t *testing.T, c client.Client, cpNS, pool string) []string {
	t.Helper()
	vms := &v1.VirtualMachineList{}
	if err := c.List(context.Background(), vms, client.InNamespace(cpNS), client.MatchingLabels{nodepool.PoolLabel: pool}); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, vm := range vms.Items {
		names = append(names, vm.Name)
	}
	slices.Sort(names)
	return names
}

// readyNodes are the hosted cluster's Ready nodes.
func readyNodes(ctx context.Context, hosted kubernetes.Interface) ([]string, error) {
	nodes, err := hosted.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var names []string
	for _, n := range nodes.Items {
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				names = append(names, n.Name)
			}
		}
	}
	slices.Sort(names)
	return names, nil
}

// TestNodePool: `tekvirt create cluster kubevirt --node-pool-replicas 1
// --root-volume-cache-strategy PVC` gives a HostedCluster whose NodePool
// worker is a tekvirt VM in the control-plane namespace: its root volume a
// clone of the boot-image cache (status.platform.kubevirt.cacheName), it
// joins the hosted cluster with the bootstrap task's token as a Ready node
// named after the VM, runs a Pod, and has the cluster's pull secret where
// kubelet reads registry credentials. Scaling to 2 adds a worker that
// joins; scaling to 1 drains the newest node (its Pod is evicted), then
// deletes its VM and Node. A worker whose launcher is killed boots again
// and its node comes back Ready. Autoscaling (see autoscaling), then an
// infrastructure node drained (see evacuation), and one drained under a
// pool on shared volumes, whose worker migrates (see sharedPoolMigrates). A NodePool naming no
// HostedCluster says so. The control-plane namespace enforces Pod Security
// restricted, asked with HyperShift's annotation.
func TestNodePool(t *testing.T) {
	heavy(t, "10 minutes on 2 cores")
	f := framework.New(t)
	ns := f.Namespace(t)
	c := f.VMClient(t)
	ctx := context.Background()
	const name = "np"
	cpNS := ns + "-" + name
	// The pull secret reaches the workers' kubelet (no registry here
	// needs one; its place in the worker is checked below).
	pullSecret := filepath.Join(t.TempDir(), "pull-secret.json")
	if err := os.WriteFile(pullSecret, []byte(`{"auths":{"registry.example:5000":{"auth":"dXNlcjpwYXNz"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	// docs/hosted-clusters.md's commands: create, then wait for the
	// HostedCluster and the NodePool. The control-plane namespace enforces
	// Pod Security restricted (HyperShift's annotation): the provisioning
	// tasks, the control plane and the workers' launcher Pods all run
	// under it.
	env := []string{"CLUSTER_NAME=" + name, "CLUSTER_NAMESPACE=" + ns, "PULL_SECRET=" + pullSecret}
	created, err := runExample(t, f, docexample.Find(t, "hosted-create"), t.TempDir(), env...)
	destroyUnlessFailed(t, f, ns, name)

	if err != nil {
		t.Fatalf("the docs' create commands: %v\n%s", err, created)
	}
	t.Logf("the docs' create commands, to NodePool Ready: %s", time.Since(start).Round(time.Second))
	hc := &hyperv1.HostedCluster{}
	framework.Eventually(t, 8*time.Minute, "HostedCluster Available", func() error {
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, hc); err != nil {
			return err
		}
		if !meta.IsStatusConditionTrue(hc.Status.Conditions, string(hyperv1.HostedClusterAvailable)) {
			return fmt.Errorf("conditions %v", hc.Status.Conditions)
		}
		return nil
	})
	t.Logf("create -> HostedCluster Available: %s", time.Since(start).Round(time.Second))
	wantPodSecurity(t, f, cpNS, "restricted")
	np := &hyperv1.NodePool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	waitPool(t, c, np, 1, 8*time.Minute)
	t.Logf("create -> NodePool Ready with 1 node: %s", time.Since(start).Round(time.Second))

	cache := ""
	if p := np.Status.Platform; p != nil && p.KubeVirt != nil {
		cache = p.KubeVirt.CacheName
	}
	if cache == "" {
		t.Fatalf("status.platform.kubevirt.cacheName is empty: %+v", np.Status)
	}
	workers := poolWorkers(t, c, cpNS, name)
	if len(workers) != 1 {
		t.Fatalf("workers %v, want 1", workers)
	}
	root := &cdiv1.DataVolume{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: cpNS, Name: workers[0] + "-rootdisk"}, root); err != nil {
		t.Fatal(err)
	}
	if src := root.Spec.Source; src == nil || src.PVC == nil || src.PVC.Name != cache {
		t.Errorf("root volume source %+v, want a clone of the cache %s", root.Spec.Source, cache)
	}
	if np.Status.Version == "" || !strings.HasPrefix(np.Status.Version, "v1.") {
		t.Errorf("status.version %q, want the nodes' kubelet version", np.Status.Version)
	}

	hosted := hostedClient(t, f, ns, name)
	if nodes, err := readyNodes(ctx, hosted); err != nil || !slices.Equal(nodes, workers) {
		t.Fatalf("hosted Ready nodes %v (%v), want the worker VMs %v", nodes, err, workers)
	}
	runPause(t, hosted, "on-first", workers[0])
	f.BindTaskRole(t, cpNS, "execute-in-vm")
	framework.NewTaskRunRunner(t, f, framework.ExecuteInVMTaskRun(cpNS, workers[0], "cat /var/lib/kubelet/config.json", "2m")).
		CreateTaskRun().ExpectSuccess().ExpectLogs("registry.example:5000")

	// Scale up: a second worker joins.
	start = time.Now()
	mustRunExample(t, f, docexample.Find(t, "hosted-scale"), t.TempDir(), env, "scaled")
	waitPool(t, c, np, 2, 6*time.Minute)
	t.Logf("replicas 1 -> 2: second node Ready in %s", time.Since(start).Round(time.Second))
	workers2 := poolWorkers(t, c, cpNS, name)
	added := slices.DeleteFunc(slices.Clone(workers2), func(n string) bool { return n == workers[0] })
	if len(added) != 1 {
		t.Fatalf("workers after scale-up %v", workers2)
	}
	runPause(t, hosted, "on-second", added[0])

	// Scale down: the newest worker's node is drained (its Pod evicted),
	// then its VM and Node go.
	if out, err := run(f, f.Bin("kubectl"), "-n", ns, "patch", "nodepool", name, "--type=merge", "-p", `{"spec":{"replicas":1}}`); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	waitPool(t, c, np, 1, 4*time.Minute)
	framework.Eventually(t, 2*time.Minute, "the removed worker's VM, Node and Pod gone", func() error {
		if got := poolWorkers(t, c, cpNS, name); !slices.Equal(got, workers) {
			return fmt.Errorf("workers %v, want %v", got, workers)
		}
		if nodes, err := readyNodes(ctx, hosted); err != nil || !slices.Equal(nodes, workers) {
			return fmt.Errorf("hosted nodes %v (%w)", nodes, err)
		}
		if _, err := hosted.CoreV1().Pods("default").Get(ctx, "on-second", metav1.GetOptions{}); err == nil {
			return fmt.Errorf("pod on-second still exists")
		}
		return nil
	})
	if p, err := hosted.CoreV1().Pods("default").Get(ctx, "on-first", metav1.GetOptions{}); err != nil || p.Status.Phase != corev1.PodRunning {
		t.Errorf("the kept worker's Pod: %v", err)
	}

	// The kept worker's launcher Pod dies: the VM starts again and the
	// same node comes back Ready after a new boot, with the pool Ready.
	node, err := hosted.CoreV1().Nodes().Get(ctx, workers[0], metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	boot := node.Status.NodeInfo.BootID
	start = time.Now()
	if out, err := run(f, f.Bin("kubectl"), "-n", cpNS, "delete", "pod", "-l", "vm.kubevirt.io/name="+workers[0], "--wait=false"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	framework.Eventually(t, 5*time.Minute, "worker "+workers[0]+" back Ready after a new boot", func() error {
		n, err := hosted.CoreV1().Nodes().Get(ctx, workers[0], metav1.GetOptions{})
		if err != nil {
			return err
		}
		if n.Status.NodeInfo.BootID == boot {
			return fmt.Errorf("boot ID unchanged")
		}
		if nodes, err := readyNodes(ctx, hosted); err != nil || !slices.Equal(nodes, workers) {
			return fmt.Errorf("Ready nodes %v (%w)", nodes, err)
		}
		return nil
	})
	waitPool(t, c, np, 1, 2*time.Minute)
	t.Logf("worker launcher killed -> node Ready again: %s", time.Since(start).Round(time.Second))

	autoscaling(t, f, c, hosted, np, cpNS, workers[0])
	evacuation(t, f, c, np, cpNS)
	sharedPoolMigrates(t, f, c, hosted, np, cpNS)
	hostDevicePool(t, c, np, cpNS)

	// A NodePool naming a HostedCluster that does not exist.
	orphan := np.DeepCopy()
	orphan.ObjectMeta = metav1.ObjectMeta{Namespace: ns, Name: "orphan"}
	orphan.Spec.ClusterName = "nope"
	orphan.Status = hyperv1.NodePoolStatus{}
	if err := c.Create(ctx, orphan); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, "orphan NodePool reports its missing HostedCluster", func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(orphan), orphan); err != nil {
			return err
		}
		r := npCondition(orphan, hyperv1.NodePoolReadyConditionType)
		if r == nil || r.Status != corev1.ConditionFalse || r.Reason != nodepool.HostedClusterNotFoundReason || !strings.Contains(r.Message, ns+"/nope") {
			return fmt.Errorf("Ready %+v", r)
		}
		return nil
	})
	if err := c.Delete(ctx, orphan); err != nil {
		t.Fatal(err)
	}
}

// pullSecretFile writes an empty docker config JSON, the pull secret of
// the hosted clusters the tests make (their workers pull nothing).
func pullSecretFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "pull-secret.json")
	if err := os.WriteFile(path, []byte(`{"auths":{}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// runPause runs the pause image the worker carries in a Pod pinned to node.
func runPause(t *testing.T, hosted kubernetes.Interface, name, node string) {
	t.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{
			Name: "pause", Image: "tekvirt.io/pause:latest", ImagePullPolicy: corev1.PullNever}}},
	}
	if _, err := hosted.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var p *corev1.Pod
	framework.Eventually(t, 90*time.Second, "hosted Pod "+name+" Running on "+node, func() error {
		var err error
		if p, err = hosted.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{}); err != nil {
			return err
		}
		if p.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("phase %s: %v", p.Status.Phase, p.Status.ContainerStatuses)
		}
		return nil
	})
	// Its address is of its node's range (containerd's CNI template).
	n, err := hosted.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, cidr, err := net.ParseCIDR(n.Spec.PodCIDR)
	if ip := net.ParseIP(p.Status.PodIP); err != nil || ip == nil || !cidr.Contains(ip) {
		t.Errorf("hosted Pod %s has address %q, not of its node %s's podCIDR %q (%v)", name, p.Status.PodIP, node, n.Spec.PodCIDR, err)
	}
}

// autoscaling: docs/hosted-clusters.md's patch (replicas removed, autoScaling min 2 max 5)
// grows the pool to its min; three Pods of 600m on 1-core workers leave
// one unschedulable, and a third worker is added for it; with the load
// gone and the HostedCluster's unneeded time at 30 s, one empty worker is
// drained and removed, back to the min. The kept worker runs a Pod no
// controller owns, which keeps it.
func autoscaling(t *testing.T, f *framework.Framework, c client.Client, hosted kubernetes.Interface, np *hyperv1.NodePool, cpNS, kept string) {
	t.Helper()
	ctx := context.Background()
	ns, name := np.Namespace, np.Name
	if out, err := run(f, f.Bin("kubectl"), "-n", ns, "patch", "hostedcluster", name, "--type=merge", "-p",
		`{"spec":{"autoscaling":{"scaleDown":{"unneededDurationSeconds":30}}}}`); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	start := time.Now()
	mustRunExample(t, f, docexample.Find(t, "hosted-autoscale"), t.TempDir(), []string{"CLUSTER_NAME=" + name, "CLUSTER_NAMESPACE=" + ns}, "patched")
	waitPool(t, c, np, 2, 6*time.Minute)
	t.Logf("autoscaling min 2: second worker Ready in %s", time.Since(start).Round(time.Second))
	if a := npCondition(np, hyperv1.NodePoolAutoscalingEnabledConditionType); a == nil || a.Status != corev1.ConditionTrue {
		t.Errorf("AutoscalingEnabled %+v", a)
	}

	replicas := int32(3)
	labels := map[string]string{"app": "load"}
	load := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "load"},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "pause", Image: "tekvirt.io/pause:latest", ImagePullPolicy: corev1.PullNever,
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("600m")}}}}}}},
	}
	start = time.Now()
	if _, err := hosted.AppsV1().Deployments("default").Create(ctx, load, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 6*time.Minute, "3 load Pods Running on 3 workers", func() error {
		d, err := hosted.AppsV1().Deployments("default").Get(ctx, "load", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if d.Status.ReadyReplicas != replicas {
			return fmt.Errorf("%d of %d load Pods ready; workers %v", d.Status.ReadyReplicas, replicas, poolWorkers(t, c, cpNS, name))
		}
		return nil
	})
	t.Logf("unschedulable Pod -> new worker -> Pod Running: %s", time.Since(start).Round(time.Second))
	if got := poolWorkers(t, c, cpNS, name); len(got) != 3 {
		t.Errorf("workers %v, want 3", got)
	}

	start = time.Now()
	if err := hosted.AppsV1().Deployments("default").Delete(ctx, "load", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 5*time.Minute, "an unneeded worker removed, down to min 2", func() error {
		got := poolWorkers(t, c, cpNS, name)
		if len(got) != 2 || !slices.Contains(got, kept) {
			return fmt.Errorf("workers %v, want 2 with %s", got, kept)
		}
		return nil
	})
	t.Logf("load gone -> worker removed: %s", time.Since(start).Round(time.Second))
	waitPool(t, c, np, 2, 2*time.Minute)
	// Min holds: nothing more goes although the other worker is empty too.
	time.Sleep(20 * time.Second)
	if got := poolWorkers(t, c, cpNS, name); len(got) != 2 {
		t.Errorf("workers %v below min 2", got)
	}
}

// evacuation: `kubectl drain` of the infrastructure node a worker runs on
// (its launcher Pods only; the control plane stays) is held by the
// workers' evictionStrategy External until the NodePool has drained their
// hosted nodes and replaced them; the drain then completes and the pool
// is Ready again with its workers elsewhere.
func evacuation(t *testing.T, f *framework.Framework, c client.Client, np *hyperv1.NodePool, cpNS string) {
	t.Helper()
	ctx := context.Background()
	before := poolWorkers(t, c, cpNS, np.Name)
	vmi := &v1.VirtualMachineInstance{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: cpNS, Name: before[0]}, vmi); err != nil {
		t.Fatal(err)
	}
	infra := vmi.Status.NodeName
	var moved []string
	for _, w := range before {
		if err := c.Get(ctx, client.ObjectKey{Namespace: cpNS, Name: w}, vmi); err == nil && vmi.Status.NodeName == infra {
			moved = append(moved, w)
		}
	}
	t.Cleanup(func() {
		if out, err := run(f, f.Bin("kubectl"), "uncordon", infra); err != nil {
			t.Logf("uncordon %s: %v %s", infra, err, out)
		}
	})
	start := time.Now()
	out, err := run(f, f.Bin("kubectl"), "drain", infra, "--pod-selector=kubevirt.io=virt-launcher,"+nodepool.PoolLabel+"="+np.Name,
		"--ignore-daemonsets", "--delete-emptydir-data", "--timeout=6m")
	if err != nil {
		t.Fatalf("kubectl drain %s: %v\n%s", infra, err, out)
	}
	t.Logf("kubectl drain %s (workers %v on it) completed in %s", infra, moved, time.Since(start).Round(time.Second))
	waitPool(t, c, np, 2, 6*time.Minute)
	t.Logf("infrastructure drain -> pool Ready again: %s", time.Since(start).Round(time.Second))
	after := poolWorkers(t, c, cpNS, np.Name)
	for _, w := range after {
		if slices.Contains(moved, w) {
			t.Errorf("worker %s on the drained node %s was not replaced (workers %v)", w, infra, after)
		}
		if err := c.Get(ctx, client.ObjectKey{Namespace: cpNS, Name: w}, vmi); err != nil || vmi.Status.NodeName == infra {
			t.Errorf("worker %s runs on %q (%v), not off the drained %s", w, vmi.Status.NodeName, err, infra)
		}
	}
}

// hostDevicePool: a pool whose workers want two of a device no
// infrastructure node advertises gets VMs with those host devices, which
// stay unschedulable; the pool says so with the scheduler's message.
func hostDevicePool(t *testing.T, c client.Client, np *hyperv1.NodePool, cpNS string) {
	t.Helper()
	ctx := context.Background()
	res := "devices.tekvirt.io/e2e-gpu"
	gpu := np.DeepCopy()
	gpu.ObjectMeta = metav1.ObjectMeta{Namespace: np.Namespace, Name: "gpu"}
	gpu.Spec.Replicas, gpu.Spec.AutoScaling = ptr(int32(1)), nil
	gpu.Spec.Platform.Kubevirt.KubevirtHostDevices = []hyperv1.KubevirtHostDevice{{DeviceName: res, Count: 2}}
	gpu.Status = hyperv1.NodePoolStatus{}
	if err := c.Create(ctx, gpu); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 2*time.Minute, "the host-device pool's worker unschedulable for want of "+res, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(gpu), gpu); err != nil {
			return err
		}
		if v := npCondition(gpu, hyperv1.NodePoolValidPlatformConfigConditionType); v == nil || v.Status != corev1.ConditionTrue {
			return fmt.Errorf("ValidPlatformConfig %+v", v)
		}
		m := npCondition(gpu, hyperv1.NodePoolAllMachinesReadyConditionType)
		if m == nil || m.Status != corev1.ConditionFalse || !strings.Contains(m.Message, "unschedulable") || !strings.Contains(m.Message, "Insufficient "+res) {
			return fmt.Errorf("AllMachinesReady %+v", m)
		}
		return nil
	})
	workers := poolWorkers(t, c, cpNS, gpu.Name)
	if len(workers) != 1 {
		t.Fatalf("host-device pool workers %v, want 1", workers)
	}
	vm := &v1.VirtualMachine{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: cpNS, Name: workers[0]}, vm); err != nil {
		t.Fatal(err)
	}
	if hd := vm.Spec.Template.Spec.Domain.Devices.HostDevices; len(hd) != 2 || hd[0].DeviceName != res || hd[1].DeviceName != res {
		t.Errorf("worker %s hostDevices %+v, want 2 of %s", vm.Name, hd, res)
	}
	if err := c.Delete(ctx, gpu); err != nil {
		t.Fatal(err)
	}
	framework.WaitGone(t, c, vm, 2*time.Minute)
}

// wantPodSecurity checks the Pod Security level namespace ns enforces.
func wantPodSecurity(t *testing.T, f *framework.Framework, ns, level string) {
	t.Helper()
	got, err := f.Kube.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l := got.Labels["pod-security.kubernetes.io/enforce"]; l != level {
		t.Errorf("namespace %s enforces Pod Security %q, want %q", ns, l, level)
	}
}
