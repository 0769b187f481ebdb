package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/e2e/docexample"
	"github.com/tekvirt/tekvirt/e2e/framework"
)

// evictionVM starts a VM whose VMIs have strategy (nil: none of their
// own) and returns its running VMI.
func evictionVM(t *testing.T, f *framework.Framework, c client.Client, ns, name string, strategy *v1.EvictionStrategy) *v1.VirtualMachineInstance {
	t.Helper()
	vm := framework.GuestVM(ns, name, framework.GuestImage, v1.RunStrategyAlways)
	vm.Spec.Template.Spec.EvictionStrategy = strategy
	if err := c.Create(context.Background(), vm); err != nil {
		t.Fatal(err)
	}
	return framework.WaitVMI(t, c, ns, name, 3*time.Minute, "running", func(v *v1.VirtualMachineInstance) error {
		if v.Status.Phase != v1.Running {
			return fmt.Errorf("phase %s", v.Status.Phase)
		}
		return nil
	})
}

// evict asks the eviction API to evict the VMI's launcher Pod, as kubectl
// drain does.
func evict(t *testing.T, f *framework.Framework, vmi *v1.VirtualMachineInstance) (string, error) {
	t.Helper()
	pod := f.LauncherPod(t, vmi)
	return pod.Name, f.Kube.CoreV1().Pods(vmi.Namespace).EvictV1(context.Background(), &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: vmi.Namespace, Name: pod.Name}})
}

// hyperConvergedKubectl runs kubectl on the HyperConverged's namespace.
func hyperConvergedKubectl(t *testing.T, f *framework.Framework, args ...string) string {
	t.Helper()
	out, err := exec.Command(f.Bin("kubectl"), append([]string{"--kubeconfig", f.Kubeconfig, "-n", "tekvirt-system"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// hyperConvergedEviction is the HyperConverged's spec.evictionStrategy, as
// kubectl's jsonpath prints it.
func hyperConvergedEviction(t *testing.T, f *framework.Framework) string {
	t.Helper()
	return hyperConvergedKubectl(t, f, "get", "hyperconverged", "kubevirt-hyperconverged", "-o", "jsonpath={.spec.evictionStrategy}")
}

// TestEvictionStrategy: evictions of launcher Pods (what kubectl drain
// sends) follow the VMI's evictionStrategy as KubeVirt's do:
// External refuses with 429 and marks the VMI for evacuation from its node
// (a PodDisruptionBudget guards the Pod too); LiveMigrate refuses and
// migrates the VMI to the other node (the Pod it left then goes), or only
// refuses for a VMI that cannot migrate; None lets the Pod go and the VM
// starts a new VMI;
// an editor of another namespace may not evict at all.
// The HyperConverged's evictionStrategy (LiveMigrate by default on two
// nodes, as HCO's), set with the documentation's kubectl patch, applies
// to VMIs without their own.
func TestEvictionStrategy(t *testing.T) {
	f := framework.New(t)
	f.TwoNodes(t) // a LiveMigrate VMI migrates to the other
	ns := f.Namespace(t)
	c := f.VMClient(t)
	ctx := context.Background()
	external, live, none := v1.EvictionStrategyExternal, v1.EvictionStrategyLiveMigrate, v1.EvictionStrategyNone
	// HCO's default on a cluster with two nodes to run VMs on.
	if got := hyperConvergedEviction(t, f); got != string(live) {
		t.Errorf("the HyperConverged's evictionStrategy on two nodes: %q, want %s", got, live)
	}

	ext := evictionVM(t, f, c, ns, "external", &external)
	// An editor of another namespace can neither evict the launcher nor
	// so mark the VMI.
	other := f.Namespace(t)
	bindUser(t, f, other, "e2e-editor", "edit")
	launcher := f.LauncherPod(t, ext)
	err := clientsetAs(t, f, "e2e-editor").CoreV1().Pods(ns).EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: launcher.Name}})
	if !apierrors.IsForbidden(err) {
		t.Errorf("eviction by an editor of another namespace: %v, want 403", err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(ext), ext); err != nil || ext.Status.EvacuationNodeName != "" {
		t.Errorf("the refused eviction marked the VMI: %q %v", ext.Status.EvacuationNodeName, err)
	}
	pod, err := evict(t, f, ext)
	if !apierrors.IsTooManyRequests(err) || !strings.Contains(err.Error(), `Eviction triggered evacuation of VMI "`+ns+`/external"`) {
		t.Fatalf("evicting the launcher of an External VMI: %v, want 429 triggering its evacuation", err)
	}
	got := framework.WaitVMI(t, c, ns, "external", 30*time.Second, "marked for evacuation", func(v *v1.VirtualMachineInstance) error {
		if v.Status.EvacuationNodeName != ext.Status.NodeName {
			return fmt.Errorf("evacuationNodeName %q, want %q", v.Status.EvacuationNodeName, ext.Status.NodeName)
		}
		return nil
	})
	if _, err := evict(t, f, got); !apierrors.IsTooManyRequests(err) || !strings.Contains(err.Error(), "Evacuation in progress") {
		t.Errorf("a second eviction: %v, want 429 saying the evacuation is in progress", err)
	}
	if _, err := f.Kube.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "kubevirt-disruption-budget-external", metav1.GetOptions{}); err != nil {
		t.Errorf("no disruption budget guards the External VMI's launcher: %v", err)
	}
	time.Sleep(3 * time.Second)
	if p, err := f.Kube.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{}); err != nil || p.DeletionTimestamp != nil {
		t.Errorf("the External VMI's launcher Pod went: %v", err)
	}

	// LiveMigrate: the eviction is refused and the VMI migrates to the
	// other node; evicting the Pod it left then goes through, as a drain's
	// next try does.
	lm := evictionVM(t, f, c, ns, "live-migrate", &live)
	lm = framework.WaitVMI(t, c, ns, lm.Name, 30*time.Second, "live-migratable", framework.LiveMigratable(corev1.ConditionTrue, "", ""))
	left, err := evict(t, f, lm)
	if !apierrors.IsTooManyRequests(err) || !strings.Contains(err.Error(), `Eviction triggered evacuation of VMI "`+ns+`/live-migrate"`) {
		t.Fatalf("evicting the launcher of a LiveMigrate VMI: %v, want 429 triggering its evacuation", err)
	}
	moved := framework.WaitVMI(t, c, ns, lm.Name, 5*time.Minute, "migrated off its node", func(v *v1.VirtualMachineInstance) error {
		if v.Status.NodeName == lm.Status.NodeName || v.Status.EvacuationNodeName != "" || v.Status.Phase != v1.Running {
			return fmt.Errorf("on %s (evacuating %q), %s; migration %+v", v.Status.NodeName, v.Status.EvacuationNodeName, v.Status.Phase, v.Status.MigrationState)
		}
		return nil
	})
	if moved.UID != lm.UID {
		t.Errorf("the evacuated VMI is another: %s, was %s", moved.UID, lm.UID)
	}
	framework.Eventually(t, time.Minute, "the Pod the VMI left evicted", func() error {
		return f.Kube.CoreV1().Pods(ns).EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: left}})
	})
	// A LiveMigrate VMI that cannot migrate (bridge on the pod network)
	// keeps its Pod: the eviction is refused, saying why.
	pinned := framework.GuestVM(ns, "pinned", framework.GuestImage, v1.RunStrategyAlways)
	pinned.Spec.Template.Spec.EvictionStrategy = &live
	pinned.Spec.Template.Spec.Domain.Devices.Interfaces[0].InterfaceBindingMethod = v1.InterfaceBindingMethod{Bridge: &v1.InterfaceBridge{}}
	if err := c.Create(ctx, pinned); err != nil {
		t.Fatal(err)
	}
	stuck := framework.WaitVMI(t, c, ns, pinned.Name, 3*time.Minute, "not live-migratable", framework.LiveMigratable(corev1.ConditionFalse, v1.VirtualMachineInstanceReasonInterfaceNotMigratable, ""))
	if _, err := evict(t, f, stuck); !apierrors.IsTooManyRequests(err) || !strings.Contains(err.Error(), "not live-migratable") {
		t.Errorf("evicting the launcher of a LiveMigrate VMI that cannot migrate: %v, want 429 saying it cannot migrate", err)
	}

	out, err := exec.Command(f.Bin("kubectl"), "--kubeconfig", f.Kubeconfig, "-n", "tekvirt-system", "patch", "hyperconverged", "kubevirt-hyperconverged",
		"--type=merge", "-p", `{"spec":{"evictionStrategy":"Migrate"}}`).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "spec.evictionStrategy") {
		t.Errorf("an evictionStrategy outside HCO's values: %v %s, want refused naming spec.evictionStrategy", err, out)
	}
	wus := &struct {
		Spec struct {
			WorkloadUpdateStrategy struct {
				WorkloadUpdateMethods []string `json:"workloadUpdateMethods"`
				BatchEvictionSize     int      `json:"batchEvictionSize"`
			} `json:"workloadUpdateStrategy"`
		} `json:"spec"`
	}{}
	raw, err := f.Kube.Discovery().RESTClient().Get().AbsPath("/apis/hco.kubevirt.io/v1beta1/namespaces/tekvirt-system/hyperconvergeds/kubevirt-hyperconverged").DoRaw(ctx)
	if err != nil || json.Unmarshal(raw, wus) != nil || strings.Join(wus.Spec.WorkloadUpdateStrategy.WorkloadUpdateMethods, ",") != "LiveMigrate" || wus.Spec.WorkloadUpdateStrategy.BatchEvictionSize != 10 {
		t.Errorf("workloadUpdateStrategy, want HCO's defaults: %v %s", err, raw)
	}
	// docs/vms.md's patch, as HCO's documentation shows it.
	mustRunExample(t, f, docexample.Find(t, "vms-eviction-strategy"), t.TempDir(), nil, "patched")
	t.Cleanup(func() {
		// Unset, the operator sets the default again.
		hyperConvergedKubectl(t, f, "patch", "hyperconverged", "kubevirt-hyperconverged", "--type=json", "-p", `[{"op":"remove","path":"/spec/evictionStrategy"}]`)
	})
	if got := hyperConvergedEviction(t, f); got != "External" {
		t.Fatalf("HyperConverged evictionStrategy after the patch: %q", got)
	}
	def := evictionVM(t, f, c, ns, "cluster-default", nil)
	if _, err := evict(t, f, def); !apierrors.IsTooManyRequests(err) || !strings.Contains(err.Error(), "evacuation") {
		t.Errorf("evicting a VMI without its own strategy under the cluster's External: %v, want 429", err)
	}

	own := evictionVM(t, f, c, ns, "none", &none)
	if _, err := evict(t, f, own); err != nil {
		t.Fatalf("evicting the launcher of a None VMI (its own strategy over the cluster's): %v", err)
	}
	framework.WaitVMI(t, c, ns, "none", 3*time.Minute, "a new VMI running after the eviction", func(v *v1.VirtualMachineInstance) error {
		if v.UID == own.UID {
			return fmt.Errorf("still the evicted VMI (%s)", v.Status.Phase)
		}
		if v.Status.Phase != v1.Running {
			return fmt.Errorf("phase %s", v.Status.Phase)
		}
		return nil
	})
}
