package framework

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pipelinev1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	v1 "kubevirt.io/api/core/v1"
	migrationsv1alpha1 "kubevirt.io/api/migrations/v1alpha1"
	snapshotv1beta1 "kubevirt.io/api/snapshot/v1beta1"

	templatev1 "github.com/openshift/api/template/v1"
	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	uploadv1beta1 "kubevirt.io/containerized-data-importer-api/pkg/apis/upload/v1beta1"

	hcov1beta1 "github.com/tekvirt/tekvirt/controllers/apis/hco/v1beta1"
	nacv1 "github.com/tekvirt/tekvirt/controllers/apis/networkaddons/v1"
	ctrlconfig "github.com/tekvirt/tekvirt/controllers/config"
	"github.com/tekvirt/tekvirt/e2e/cluster"
)

// GuestImage is the guest containerDisk `tekvirt up` publishes.
const GuestImage = cluster.GuestImage

// VMRoot is where the node handler keeps one directory per VMI (by UID).
const VMRoot = cluster.NodeRoot + "/vms"

// VMClient is a client that knows the KubeVirt, CDI (upload too),
// HyperShift, OpenShift Template, HyperConverged, NetworkAddonsConfig and
// MigrationPolicy types.
func (f *Framework) VMClient(t testing.TB) client.WithWatch {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := v1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := cdiv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := uploadv1beta1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := hyperv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := templatev1.Install(s); err != nil {
		t.Fatal(err)
	}
	for _, add := range []func(*runtime.Scheme) error{hcov1beta1.AddToScheme, nacv1.AddToScheme, migrationsv1alpha1.AddToScheme, snapshotv1beta1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	c, err := client.NewWithWatch(f.Config, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// GuestVMI is the spec of a VMI booting image (a containerDisk) with a
// cloud-init hostname; 256Mi, the masquerade interface, 10 s grace.
func GuestVMI(image, hostname string) v1.VirtualMachineInstanceSpec {
	grace := int64(10)
	return v1.VirtualMachineInstanceSpec{
		TerminationGracePeriodSeconds: &grace,
		Domain: v1.DomainSpec{
			Resources: v1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")}},
			Devices: v1.Devices{
				Disks: []v1.Disk{
					{Name: "containerdisk", DiskDevice: v1.DiskDevice{Disk: &v1.DiskTarget{Bus: v1.DiskBusVirtio}}},
					{Name: "cloudinitdisk", DiskDevice: v1.DiskDevice{Disk: &v1.DiskTarget{Bus: v1.DiskBusVirtio}}},
				},
				Interfaces: []v1.Interface{{Name: "default", InterfaceBindingMethod: v1.InterfaceBindingMethod{Masquerade: &v1.InterfaceMasquerade{}}}},
			},
		},
		Networks: []v1.Network{{Name: "default", NetworkSource: v1.NetworkSource{Pod: &v1.PodNetwork{}}}},
		Volumes: []v1.Volume{
			{Name: "containerdisk", VolumeSource: v1.VolumeSource{ContainerDisk: &v1.ContainerDiskSource{Image: image}}},
			{Name: "cloudinitdisk", VolumeSource: v1.VolumeSource{CloudInitNoCloud: &v1.CloudInitNoCloudSource{
				UserData: "#cloud-config\nhostname: " + hostname + "\n",
			}}},
		},
	}
}

// GuestVM is a VM running GuestVMI with the given run strategy.
func GuestVM(ns, name, image string, rs v1.VirtualMachineRunStrategy) *v1.VirtualMachine {
	return &v1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.VirtualMachineSpec{
			RunStrategy: &rs,
			Template:    &v1.VirtualMachineInstanceTemplateSpec{Spec: GuestVMI(image, name)},
		},
	}
}

// WaitVMI polls the VMI until cond accepts it, and returns it.
func WaitVMI(t testing.TB, c client.Client, ns, name string, timeout time.Duration, what string, cond func(*v1.VirtualMachineInstance) error) *v1.VirtualMachineInstance {
	t.Helper()
	vmi := &v1.VirtualMachineInstance{}
	Eventually(t, timeout, "VMI "+ns+"/"+name+" "+what, func() error {
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, vmi); err != nil {
			return err
		}
		return cond(vmi)
	})
	return vmi
}

// AgentConnected accepts a Running VMI whose guest agent answers.
func AgentConnected(vmi *v1.VirtualMachineInstance) error {
	if vmi.Status.Phase != v1.Running {
		return fmt.Errorf("phase %q, conditions %+v", vmi.Status.Phase, vmi.Status.Conditions)
	}
	for _, c := range vmi.Status.Conditions {
		if c.Type == v1.VirtualMachineInstanceAgentConnected && c.Status == corev1.ConditionTrue {
			return nil
		}
	}
	return fmt.Errorf("running, guest agent not connected yet")
}

// LiveMigratable is a WaitVMI check: the VMI's LiveMigratable condition
// has status want, with reason and a message naming about (both only
// checked when given).
func LiveMigratable(want corev1.ConditionStatus, reason, about string) func(*v1.VirtualMachineInstance) error {
	return func(vmi *v1.VirtualMachineInstance) error {
		for _, c := range vmi.Status.Conditions {
			if c.Type != v1.VirtualMachineInstanceIsMigratable {
				continue
			}
			if c.Status != want || c.Reason != reason || !strings.Contains(c.Message, about) {
				return fmt.Errorf("LiveMigratable %s (%s: %s), want %s (%s, naming %q)", c.Status, c.Reason, c.Message, want, reason, about)
			}
			return nil
		}
		return fmt.Errorf("no LiveMigratable condition yet: %+v", vmi.Status.Conditions)
	}
}

// WaitGone polls until obj (with its key set) does not exist.
func WaitGone(t testing.TB, c client.Client, obj client.Object, timeout time.Duration) {
	t.Helper()
	key := client.ObjectKeyFromObject(obj)
	Eventually(t, timeout, fmt.Sprintf("%T %s gone", obj, key), func() error {
		err := c.Get(context.Background(), key, obj)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("still there")
	})
}

// QEMUPid is the pid of the QEMU running libvirt domain name on this
// machine (on the node's libvirtd or in a launcher Pod), 0 if none. A VM
// that restarts gets a new one.
func QEMUPid(name string) int {
	return findProcess(isQEMUOf(name))
}

// QEMUCount is how many QEMUs run domain name on this machine, on every
// node: one for a VM, and one again once a live migration ended.
func QEMUCount(name string) int {
	n := 0
	findProcess(func(cmdline string) bool {
		if isQEMUOf(name)(cmdline) {
			n++
		}
		return false
	})
	return n
}

func isQEMUOf(name string) func(cmdline string) bool {
	return func(cmdline string) bool {
		return strings.HasPrefix(cmdline, "/usr/bin/qemu-system") && strings.Contains(cmdline, "guest="+name+",")
	}
}

// findProcess is the first process on this machine whose command line
// (arguments separated by NUL) matches, 0 if none.
func findProcess(match func(cmdline string) bool) int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && match(string(cmdline)) {
			return pid
		}
	}
	return 0
}

// ParentPID is the parent of pid (the launcher, its container's init, for
// a QEMU in a launcher Pod).
func ParentPID(t testing.TB, pid int) int {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "PPid:"); ok {
			ppid, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatal(err)
			}
			return ppid
		}
	}
	t.Fatalf("no parent of %d", pid)
	return 0
}

// LauncherPod is the launcher Pod of vmi: its only one, or, once it
// migrated (the source's Pod completed), the one on the node it runs on.
func (f *Framework) LauncherPod(t testing.TB, vmi *v1.VirtualMachineInstance) *corev1.Pod {
	t.Helper()
	pods, err := f.Kube.CoreV1().Pods(vmi.Namespace).List(context.Background(), metav1.ListOptions{LabelSelector: "kubevirt.io/created-by=" + string(vmi.UID)})
	if err != nil {
		t.Fatalf("launcher Pods of %s/%s: %v", vmi.Namespace, vmi.Name, err)
	}
	if len(pods.Items) == 1 {
		return &pods.Items[0]
	}
	var active []*corev1.Pod
	for i := range pods.Items {
		if p := &pods.Items[i]; vmi.Status.ActivePods[p.UID] == vmi.Status.NodeName && p.Status.Phase == corev1.PodRunning {
			active = append(active, p)
		}
	}
	if len(active) != 1 {
		t.Fatalf("launcher Pods of %s/%s on node %q: %d of %d", vmi.Namespace, vmi.Name, vmi.Status.NodeName, len(active), len(pods.Items))
	}
	return active[0]
}

// HandlerPod is the handler DaemonSet's Pod on node that is not being
// deleted.
func (f *Framework) HandlerPod(t testing.TB, node string) *corev1.Pod {
	t.Helper()
	pods, err := f.Kube.CoreV1().Pods(ctrlconfig.NodeNamespace).List(context.Background(), metav1.ListOptions{
		LabelSelector: "app.kubernetes.io/name=" + ctrlconfig.HandlerDaemonSet, FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		t.Fatal(err)
	}
	for i := range pods.Items {
		if pods.Items[i].DeletionTimestamp == nil {
			return &pods.Items[i]
		}
	}
	t.Fatalf("no handler Pod on node %s", node)
	return nil
}

// RestartHandler deletes node's handler Pod and waits for the one the
// DaemonSet makes in its place to be ready.
func (f *Framework) RestartHandler(t testing.TB, node string) {
	t.Helper()
	ctx := context.Background()
	old := f.HandlerPod(t, node)
	if err := f.Kube.CoreV1().Pods(old.Namespace).Delete(ctx, old.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	Eventually(t, 2*time.Minute, "a new handler Pod on "+node+", ready", func() error {
		pods, err := f.Kube.CoreV1().Pods(old.Namespace).List(ctx, metav1.ListOptions{
			LabelSelector: "app.kubernetes.io/name=" + ctrlconfig.HandlerDaemonSet, FieldSelector: "spec.nodeName=" + node})
		if err != nil {
			return err
		}
		for _, p := range pods.Items {
			if p.UID != old.UID && p.DeletionTimestamp == nil && podReady(&p) {
				return nil
			}
		}
		return fmt.Errorf("%d handler Pods, none new and ready", len(pods.Items))
	})
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// HandlerPID is the pid of the handler process on this machine (the one
// node's handler container), 0 if none runs.
func HandlerPID() int {
	return findProcess(func(cmdline string) bool { return strings.HasPrefix(cmdline, "/ko-app/tekvirt-handler\x00") })
}

// BindTaskRole lets the catalog task's ServiceAccount act in ns, as the
// task READMEs tell users to do for their own namespaces.
func (f *Framework) BindTaskRole(t testing.TB, ns, task string) {
	t.Helper()
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: task + "-task", Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: task + "-task"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: task + "-task", Namespace: CatalogNamespace}},
	}
	if _, err := f.Kube.RbacV1().RoleBindings(ns).Create(context.Background(), rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// ExecuteInVMTaskRun runs the catalog's execute-in-vm on vm in ns.
func ExecuteInVMTaskRun(ns, vm, script, timeout string) *pipelinev1.TaskRun {
	return &pipelinev1.TaskRun{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "execute-in-vm-", Namespace: CatalogNamespace},
		Spec: pipelinev1.TaskRunSpec{
			TaskRef:            &pipelinev1.TaskRef{Name: "execute-in-vm"},
			ServiceAccountName: "execute-in-vm-task",
			Params: pipelinev1.Params{
				{Name: "vmName", Value: *pipelinev1.NewStructuredValues(vm)},
				{Name: "vmNamespace", Value: *pipelinev1.NewStructuredValues(ns)},
				{Name: "script", Value: *pipelinev1.NewStructuredValues(script)},
				{Name: "timeout", Value: *pipelinev1.NewStructuredValues(timeout)},
			},
		},
	}
}

// CatalogTaskRun runs the catalog task as its ServiceAccount in the
// catalog namespace; a param's value is a string or, for an array param,
// a []string.
func CatalogTaskRun(task string, params map[string]any) *pipelinev1.TaskRun {
	tr := &pipelinev1.TaskRun{
		ObjectMeta: metav1.ObjectMeta{GenerateName: task + "-", Namespace: CatalogNamespace},
		Spec:       pipelinev1.TaskRunSpec{TaskRef: &pipelinev1.TaskRef{Name: task}, ServiceAccountName: task + "-task"},
	}
	for k, v := range params {
		var val pipelinev1.ParamValue
		switch v := v.(type) {
		case string:
			val = *pipelinev1.NewStructuredValues(v)
		case []string:
			val = pipelinev1.ParamValue{Type: pipelinev1.ParamTypeArray, ArrayVal: v}
		default:
			panic(fmt.Sprintf("param %s: %T is neither string nor []string", k, v))
		}
		tr.Spec.Params = append(tr.Spec.Params, pipelinev1.Param{Name: k, Value: val})
	}
	return tr
}
