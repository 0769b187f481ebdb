package vmi

import (
	"context"
	"errors"
	"strings"
	"testing"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v1 "kubevirt.io/api/core/v1"
)

type podFixture struct {
	t *testing.T
	c client.Client
	r *Reconciler
}

func newPodFixture(t *testing.T, vmi *v1.VirtualMachineInstance) *podFixture {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(vmi).WithStatusSubresource(vmi, &corev1.Pod{}).Build()
	return &podFixture{t: t, c: c, r: &Reconciler{Client: c, Reader: c, LauncherImage: "reg/launcher:1"}}
}

func (f *podFixture) reconcile() *v1.VirtualMachineInstance {
	f.t.Helper()
	if _, err := f.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "vm1"}}); err != nil {
		f.t.Fatal(err)
	}
	vmi := &v1.VirtualMachineInstance{}
	if err := f.c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "vm1"}, vmi); err != nil {
		f.t.Fatal(err)
	}
	return vmi
}

func (f *podFixture) pods() []corev1.Pod {
	f.t.Helper()
	list := &corev1.PodList{}
	if err := f.c.List(context.Background(), list); err != nil {
		f.t.Fatal(err)
	}
	return list.Items
}

func (f *podFixture) setPod(change func(*corev1.Pod)) {
	f.t.Helper()
	pod := f.pods()[0]
	change(&pod)
	status := pod.Status
	if err := f.c.Update(context.Background(), &pod); err != nil {
		f.t.Fatal(err)
	}
	pod.Status = status
	if err := f.c.Status().Update(context.Background(), &pod); err != nil {
		f.t.Fatal(err)
	}
}

func TestReconcilerFollowsTheLauncherPod(t *testing.T) {
	vmi := guestVMI()
	f := newPodFixture(t, vmi)
	got := f.reconcile()
	if pods := f.pods(); len(pods) != 1 || pods[0].Labels[CreatedByLabel] != "uid-1" || got.Status.Phase != v1.Scheduling {
		t.Fatalf("first reconcile: %d pods, phase %q", len(pods), got.Status.Phase)
	}
	f.reconcile()
	if n := len(f.pods()); n != 1 {
		t.Fatalf("a second reconcile made another Pod: %d", n)
	}

	msg := "0/1 nodes are available: 1 Insufficient memory."
	f.setPod(func(p *corev1.Pod) {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: msg}}
	})
	got = f.reconcile()
	if c := condition(got, PodScheduledCondition); got.Status.Phase != v1.Scheduling || c == nil || c.Message != msg {
		t.Errorf("unschedulable: phase %q, condition %+v", got.Status.Phase, c)
	}

	f.setPod(func(p *corev1.Pod) { p.UID, p.Spec.NodeName, p.Status.Conditions = "pod-uid-1", "node2", nil }) // the fake client gives no UID
	got = f.reconcile()
	if got.Status.Phase != v1.Scheduled || got.Status.NodeName != "node2" || got.Labels[v1.NodeNameLabel] != "node2" {
		t.Errorf("bound: phase %q node %q labels %v", got.Status.Phase, got.Status.NodeName, got.Labels)
	}
	if pod := f.pods()[0]; pod.UID == "" || len(got.Status.ActivePods) != 1 || got.Status.ActivePods[pod.UID] != "node2" {
		t.Errorf("activePods %v, want the Pod's UID %s on node2", got.Status.ActivePods, pod.UID)
	}

	// The handler runs it from here; the controller only notices a Pod that
	// failed under it.
	got.Status.Phase = v1.Running
	if err := f.c.Status().Update(context.Background(), got); err != nil {
		t.Fatal(err)
	}
	f.setPod(func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded })
	if got = f.reconcile(); got.Status.Phase != v1.Running {
		t.Errorf("a Pod that completed (the guest stopped) is the handler's to report: %q", got.Status.Phase)
	}
	f.setPod(func(p *corev1.Pod) {
		p.Status.Phase, p.Status.Reason, p.Status.Message = corev1.PodFailed, "Evicted", "The node was low on resource: memory."
	})
	got = f.reconcile()
	if c := condition(got, v1.VirtualMachineInstanceReady); got.Status.Phase != v1.Failed || c == nil || c.Reason != LauncherPodEndedReason {
		t.Errorf("a failed Pod: phase %q, Ready %+v", got.Status.Phase, c)
	}
}

func condition(vmi *v1.VirtualMachineInstance, t v1.VirtualMachineInstanceConditionType) *v1.VirtualMachineInstanceCondition {
	for i := range vmi.Status.Conditions {
		if vmi.Status.Conditions[i].Type == t {
			return &vmi.Status.Conditions[i]
		}
	}
	return nil
}

func TestReconcilerFailsAVMIWhosePodIsDeleted(t *testing.T) {
	vmi := guestVMI()
	f := newPodFixture(t, vmi)
	f.reconcile()
	f.setPod(func(p *corev1.Pod) { p.Spec.NodeName, p.Finalizers = "node2", []string{"test/keep"} })
	got := f.reconcile()
	got.Status.Phase = v1.Running
	if err := f.c.Status().Update(context.Background(), got); err != nil {
		t.Fatal(err)
	}
	pod := f.pods()[0]
	if err := f.c.Delete(context.Background(), &pod); err != nil {
		t.Fatal(err)
	}
	got = f.reconcile()
	if c := condition(got, v1.VirtualMachineInstanceReady); got.Status.Phase != v1.Failed || c == nil || c.Message != "launcher Pod "+pod.Name+" was deleted" {
		t.Errorf("a launcher Pod deleted under a running VMI: phase %q, Ready %+v", got.Status.Phase, c)
	}
}

// TestReconcilerIgnoresAPodItDoesNotControl: a Pod the tenant labelled as
// the VMI's launcher, bound to a node, is not taken for it.
func TestReconcilerIgnoresAPodItDoesNotControl(t *testing.T) {
	vmi := guestVMI()
	f := newPodFixture(t, vmi)
	decoy := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "decoy", UID: "decoy-uid",
		Labels: map[string]string{CreatedByLabel: string(vmi.UID), AppLabel: AppLauncher}},
		Spec: corev1.PodSpec{NodeName: "node2"}}
	if err := f.c.Create(context.Background(), decoy); err != nil {
		t.Fatal(err)
	}
	got := f.reconcile()
	if got.Status.Phase == v1.Scheduled || got.Status.ActivePods["decoy-uid"] != "" || len(f.pods()) != 2 {
		t.Errorf("phase %q activePods %v, %d pods: the decoy was taken for the launcher", got.Status.Phase, got.Status.ActivePods, len(f.pods()))
	}
}

// TestRefusedLauncherPodIsExplained: when the API server refuses the
// launcher Pod (here Pod Security), the VMI says so where users look - its
// Synchronized condition and a FailedCreate event - and the condition goes
// once the Pod is made.
func TestRefusedLauncherPodIsExplained(t *testing.T) {
	vmi := guestVMI()
	f := newPodFixture(t, vmi)
	refusal := apierrors.NewForbidden(corev1.Resource("pods"), "virt-launcher-vm1-x", errors.New(`violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false`))
	refuse := true
	f.c = interceptor.NewClient(f.c.(client.WithWatch), interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
		if _, ok := obj.(*corev1.Pod); ok && refuse {
			return refusal
		}
		return c.Create(ctx, obj, opts...)
	}})
	rec := events.NewFakeRecorder(10)
	f.r.Client, f.r.Recorder = f.c, rec
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(vmi)}
	if _, err := f.r.Reconcile(context.Background(), req); !apierrors.IsForbidden(err) {
		t.Fatalf("reconcile: %v, want the refusal back (to retry with backoff)", err)
	}
	got := &v1.VirtualMachineInstance{}
	if err := f.c.Get(context.Background(), req.NamespacedName, got); err != nil {
		t.Fatal(err)
	}
	var sync *v1.VirtualMachineInstanceCondition
	for i := range got.Status.Conditions {
		if got.Status.Conditions[i].Type == v1.VirtualMachineInstanceSynchronized {
			sync = &got.Status.Conditions[i]
		}
	}
	if sync == nil || sync.Status != corev1.ConditionFalse || sync.Reason != FailedCreateReason || !strings.Contains(sync.Message, "violates PodSecurity") {
		t.Errorf("Synchronized = %+v, want False, FailedCreate, the server's message", sync)
	}
	if e := <-rec.Events; !strings.Contains(e, "Warning FailedCreate") || !strings.Contains(e, "violates PodSecurity") {
		t.Errorf("event %q, want a FailedCreate warning with the server's message", e)
	}
	refuse = false
	got = f.reconcile()
	for _, c := range got.Status.Conditions {
		if c.Type == v1.VirtualMachineInstanceSynchronized {
			t.Errorf("Synchronized kept after the Pod was made: %+v", c)
		}
	}
	if n := len(f.pods()); n != 1 {
		t.Errorf("%d launcher Pods, want 1", n)
	}
}

// TestMissingNetworkAttachmentIsNamed: a VMI on a Multus network whose
// NetworkAttachmentDefinition is missing gets no launcher Pod (Multus
// would leave it without a sandbox) and says which one is missing; once
// it exists the Pod is made, asking Multus for it.
func TestMissingNetworkAttachmentIsNamed(t *testing.T) {
	vmi := guestVMI()
	vmi.Spec.Domain.Devices.Interfaces = append(vmi.Spec.Domain.Devices.Interfaces, v1.Interface{Name: "lan", InterfaceBindingMethod: v1.InterfaceBindingMethod{Bridge: &v1.InterfaceBridge{}}})
	vmi.Spec.Networks = append(vmi.Spec.Networks, v1.Network{Name: "lan", NetworkSource: v1.NetworkSource{Multus: &v1.MultusNetwork{NetworkName: "blue"}}})
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1.AddToScheme, nadv1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(vmi).WithStatusSubresource(vmi, &corev1.Pod{}).Build()
	f := &podFixture{t: t, c: c, r: &Reconciler{Client: c, Reader: c, LauncherImage: "reg/launcher:1"}}
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(vmi)}
	if _, err := f.r.Reconcile(context.Background(), req); err == nil {
		t.Fatal("reconcile: no error, want the missing network back (to retry)")
	}
	got := &v1.VirtualMachineInstance{}
	if err := c.Get(context.Background(), req.NamespacedName, got); err != nil {
		t.Fatal(err)
	}
	if cond := condition(got, v1.VirtualMachineInstanceSynchronized); cond == nil || cond.Reason != FailedCreateReason ||
		!strings.Contains(cond.Message, "failed to locate network attachment definition ns/blue (spec.networks[0] lan)") {
		t.Errorf("Synchronized = %+v, want FailedCreate naming ns/blue", cond)
	}
	if n := len(f.pods()); n != 0 {
		t.Errorf("%d launcher Pods, want none", n)
	}
	nad := &nadv1.NetworkAttachmentDefinition{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "blue"}}
	if err := c.Create(context.Background(), nad); err != nil {
		t.Fatal(err)
	}
	f.reconcile()
	pods := f.pods()
	if len(pods) != 1 || !strings.Contains(pods[0].Annotations["k8s.v1.cni.cncf.io/networks"], `"name":"blue"`) {
		t.Errorf("launcher Pods %d, annotations %v", len(pods), pods)
	}
}

// TestLauncherPodFollowsAMigration: while a migration's target Pod waits,
// the VMI's Pod is its source's; once the migration completed it is the
// target's, even before the target's handler moved status.nodeName, so a
// source Pod that ended then does not end the VMI.
func TestLauncherPodFollowsAMigration(t *testing.T) {
	vmi := guestVMI()
	vmi.Status.Phase, vmi.Status.NodeName = v1.Running, "node1"
	vmi.Status.ActivePods = map[types.UID]string{"src": "node1", "tgt": "node2"}
	owner := []metav1.OwnerReference{*metav1.NewControllerRef(vmi, v1.VirtualMachineInstanceGroupVersionKind)}
	pod := func(name string, uid types.UID, labels map[string]string) *corev1.Pod {
		labels[CreatedByLabel] = string(vmi.UID)
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: uid, Labels: labels, OwnerReferences: owner}}
	}
	source := pod("source", "src", map[string]string{})
	target := pod("target", "tgt", map[string]string{v1.MigrationJobLabel: "mig-1"})
	f := newPodFixture(t, vmi)
	for _, p := range []*corev1.Pod{source, target} {
		if err := f.c.Create(context.Background(), p); err != nil {
			t.Fatal(err)
		}
	}
	got, err := f.r.launcherPod(context.Background(), vmi)
	if err != nil || got == nil || got.Name != "source" {
		t.Errorf("migrating: the VMI's Pod is %v (%v), want source", got, err)
	}
	vmi.Status.MigrationState = &v1.VirtualMachineInstanceMigrationState{MigrationUID: "mig-1", SourceNode: "node1", TargetNode: "node2", Completed: true}
	got, err = f.r.launcherPod(context.Background(), vmi)
	if err != nil || got == nil || got.Name != "target" {
		t.Errorf("migrated: the VMI's Pod is %v (%v), want target", got, err)
	}
	vmi.Status.ActivePods, vmi.Status.MigrationState = nil, nil
	got, err = f.r.launcherPod(context.Background(), vmi)
	if err != nil || got == nil || got.Name != "source" {
		t.Errorf("not yet scheduled: the VMI's Pod is %v (%v), want the one that is no migration's target", got, err)
	}
}
