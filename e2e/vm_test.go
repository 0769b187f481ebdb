package e2e

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	pipelinev1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/e2e/docexample"
	"github.com/tekvirt/tekvirt/e2e/framework"
)

// TestVMLifecycle boots the guest containerDisk from a KubeVirt manifest,
// checks what the handler reports and keeps on the node, runs a script
// through execute-in-vm (exit code and output propagated), then stops the
// VM and checks its domain and files are gone.
func TestVMLifecycle(t *testing.T) {
	t.Parallel() // mostly waiting on its own VMs and runs: see "Parallel" in doc.go
	f := framework.New(t)
	c := f.VMClient(t)
	ns := f.Namespace(t)
	ctx := context.Background()
	vm := framework.GuestVM(ns, "lifecycle", framework.GuestImage, v1.RunStrategyAlways)
	start := time.Now()
	if err := c.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
	vmi := framework.WaitVMI(t, c, ns, vm.Name, 2*time.Minute, "running with its agent", framework.AgentConnected)
	t.Logf("VM create -> guest agent connected: %s", time.Since(start).Round(100*time.Millisecond))
	if vmi.Status.NodeName == "" || vmi.Labels[v1.NodeNameLabel] != vmi.Status.NodeName || vmi.Status.GuestOSInfo.KernelRelease == "" {
		t.Errorf("VMI status lacks node or guest info: node %q labels %v guest %+v", vmi.Status.NodeName, vmi.Labels, vmi.Status.GuestOSInfo)
	}
	framework.Eventually(t, 30*time.Second, "VM printableStatus Running and Ready", func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(vm), vm); err != nil {
			return err
		}
		if vm.Status.PrintableStatus != v1.VirtualMachineStatusRunning || !vm.Status.Ready {
			return fmt.Errorf("printableStatus %q ready %v", vm.Status.PrintableStatus, vm.Status.Ready)
		}
		return nil
	})
	domain := ns + "_" + vm.Name
	checkInItsPod(t, f, vmi)
	dir := framework.HostPath(vmi.Status.NodeName, filepath.Join(framework.VMRoot, string(vmi.UID)))
	if _, err := os.Stat(dir); err != nil {
		t.Errorf("the handler keeps no directory for the VM: %v", err)
	}

	f.BindTaskRole(t, ns, "execute-in-vm")
	r := framework.NewTaskRunRunner(t, f, framework.ExecuteInVMTaskRun(ns, vm.Name, "hostname; echo to-stderr >&2; exit 3", "2m")).
		CreateTaskRun().ExpectFailure("exited with code 3").ExpectLogs("lifecycle", "to-stderr")
	if st := r.TaskRun().Status.Steps; len(st) != 1 || st[0].Terminated == nil || st[0].Terminated.ExitCode != 3 {
		t.Errorf("step state = %+v, want exit code 3", st)
	}

	// virtctl-style restart, console and stop through the tekvirt CLI.
	tekvirt(t, f, "restart", vm.Name, "-n", ns)
	first := vmi
	vmi = framework.WaitVMI(t, c, ns, vm.Name, 2*time.Minute, "restarted with its agent", func(cur *v1.VirtualMachineInstance) error {
		if cur.UID == vmi.UID {
			return fmt.Errorf("still the old VMI")
		}
		return framework.AgentConnected(cur)
	})
	// The first VMI's life in events, as KubeVirt's controller and handler
	// record it.
	framework.Eventually(t, 30*time.Second, "the first VMI's events", func() error {
		return hasEvents(f, first, "SuccessfulCreate", "Started", "ShuttingDown")
	})
	dir = framework.HostPath(vmi.Status.NodeName, filepath.Join(framework.VMRoot, string(vmi.UID)))
	if out := tekvirt(t, f, "console-log", vm.Name, "-n", ns); !strings.Contains(out, "tekvirt-guest: ready") {
		t.Errorf("tekvirt console-log shows no boot:\n%s", out)
	}
	tekvirt(t, f, "stop", vm.Name, "-n", ns)
	framework.WaitGone(t, c, &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: vm.Name}}, time.Minute)
	if pid := framework.QEMUPid(domain); pid != 0 {
		t.Errorf("QEMU %d of domain %s still runs after the VM stopped", pid, domain)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("VM directory %s left behind: %v", dir, err)
	}
	waitPrintableStatus(t, c, vm, v1.VirtualMachineStatusStopped, 30*time.Second)
	// The VM's own events, as KubeVirt's VM controller records them: its
	// VMIs created (start, restart) and deleted (restart, stop).
	framework.Eventually(t, 30*time.Second, "the VM's events", func() error {
		return hasEvents(f, vm, "SuccessfulCreate", "SuccessfulDelete")
	})
}

// waitPrintableStatus waits until vm's printableStatus is want.
func waitPrintableStatus(t *testing.T, c client.Client, vm *v1.VirtualMachine, want v1.VirtualMachinePrintableStatus, timeout time.Duration) {
	t.Helper()
	framework.Eventually(t, timeout, "VM "+vm.Name+" "+string(want), func() error {
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(vm), vm); err != nil {
			return err
		}
		if vm.Status.PrintableStatus != want {
			return fmt.Errorf("printableStatus %q", vm.Status.PrintableStatus)
		}
		return nil
	})
}

// tekvirt runs the tekvirt CLI `up` installed and returns its output.
func tekvirt(t *testing.T, f *framework.Framework, args ...string) string {
	t.Helper()
	cmd := exec.Command(f.Bin("tekvirt"), args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+f.Kubeconfig)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("tekvirt %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// objectEvents are obj's events: reason -> "reporting controller: note".
func objectEvents(f *framework.Framework, obj client.Object) (map[string]string, error) {
	list, err := f.Kube.EventsV1().Events(obj.GetNamespace()).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	seen := map[string]string{}
	for _, e := range list.Items {
		if e.Regarding.UID == obj.GetUID() {
			seen[e.Reason] = e.ReportingController + ": " + e.Note
		}
	}
	return seen, nil
}

// hasEvents checks that obj has events with each of reasons.
func hasEvents(f *framework.Framework, obj client.Object, reasons ...string) error {
	seen, err := objectEvents(f, obj)
	if err != nil {
		return err
	}
	for _, r := range reasons {
		if _, ok := seen[r]; !ok {
			return fmt.Errorf("no %s event among %v", r, seen)
		}
	}
	return nil
}

// checkInItsPod finds vmi's QEMU in the cgroup of its launcher Pod.
func checkInItsPod(t *testing.T, f *framework.Framework, vmi *v1.VirtualMachineInstance) {
	t.Helper()
	pod := f.LauncherPod(t, vmi)
	pid := framework.QEMUPid(vmi.Namespace + "_" + vmi.Name)
	cgroup, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if pid == 0 || err != nil || !strings.Contains(string(cgroup), "pod"+string(pod.UID)) {
		t.Errorf("QEMU %d of %s/%s is not in its launcher Pod's cgroup: %v %s", pid, vmi.Namespace, vmi.Name, err, cgroup)
	}
}

// TestVMTestPipeline is the README's first pipeline: the vm-test pipeline boots
// the guest, runs the default script in it, prints its output, and cleans up.
func TestVMTestPipeline(t *testing.T) {
	t.Parallel() // mostly waiting on its own VMs and runs: see "Parallel" in doc.go
	f := framework.New(t)
	// As the README shows it; tkn exits 0 whatever the run did, so its log
	// is the check.
	mustRunExample(t, f, docexample.Find(t, "readme-vm-test-pipeline"), t.TempDir(), nil,
		"hello from the guest:", "] vm-test\n", "Linux 6.", "stopped", "deleted")
	c := f.VMClient(t)
	var vms v1.VirtualMachineList
	if err := c.List(context.Background(), &vms, client.InNamespace(framework.CatalogNamespace)); err != nil {
		t.Fatal(err)
	}
	for _, vm := range vms.Items {
		if strings.HasPrefix(vm.Name, "vm-test-") && vm.DeletionTimestamp == nil {
			t.Errorf("VM %s left behind by the pipeline", vm.Name)
		}
	}
}

// TestUnsupportedVMFieldRejected: the validating webhook rejects fields the
// runtime does not implement, naming them, and admits the supported subset.
func TestUnsupportedVMFieldRejected(t *testing.T) {
	f := framework.New(t)
	c := f.VMClient(t)
	ns := f.Namespace(t)
	ctx := context.Background()
	vm := framework.GuestVM(ns, "unsupported", framework.GuestImage, v1.RunStrategyHalted)
	vm.Spec.Template.Spec.Domain.Devices.Interfaces[0].InterfaceBindingMethod = v1.InterfaceBindingMethod{SRIOV: &v1.InterfaceSRIOV{}}
	vm.Spec.Template.Spec.Domain.Devices.Watchdog = &v1.Watchdog{Name: "w"}
	err := c.Create(ctx, vm)
	for _, want := range []string{"spec.template.spec.domain.devices.watchdog", "spec.template.spec.domain.devices.interfaces[0].sriov", "denied"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("create with unsupported fields: err = %v; want it to name %q", err, want)
		}
	}
	vmi := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "usb"}, Spec: framework.GuestVMI(framework.GuestImage, "usb")}
	vmi.Spec.Domain.Devices.Disks[0].Disk.Bus = "usb"
	if err := c.Create(ctx, vmi); err == nil || !strings.Contains(err.Error(), `spec.domain.devices.disks[0].disk.bus: "usb"`) {
		t.Errorf("VMI with a usb disk: err = %v", err)
	}
	ok := framework.GuestVM(ns, "supported", framework.GuestImage, v1.RunStrategyHalted)
	if err := c.Create(ctx, ok, client.DryRunAll); err != nil {
		t.Errorf("supported VM rejected: %v", err)
	}
}

// TestVMBootsFromPVC copies the guest's bootable raw disk into a PVC as
// disk.img (as CDI would) and boots VMs from it through a
// persistentVolumeClaim volume and a dataVolume volume naming the same
// claim, each on the node and in a launcher Pod.
func TestVMBootsFromPVC(t *testing.T) {
	t.Parallel() // mostly waiting on its own VMs and runs: see "Parallel" in doc.go
	f := framework.New(t)
	c := f.VMClient(t)
	ns := f.Namespace(t)
	ctx := context.Background()
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "guest-disk"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("128Mi")}},
		},
	}
	if err := c.Create(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	hostDir := f.GuestDir()
	// The test (an admin) copies the guest from the node: Pod Security
	// refuses a host volume elsewhere.
	podSecurity(t, f, ns, "privileged")
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fill-disk"},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name: "copy", Image: registryImage(t, f, "tekvirt/busybox"),
				Command:      []string{"cp", "/guest/guest.raw", "/disk/disk.img"},
				VolumeMounts: []corev1.VolumeMount{{Name: "guest", MountPath: "/guest", ReadOnly: true}, {Name: "disk", MountPath: "/disk"}},
			}},
			Volumes: []corev1.Volume{
				{Name: "guest", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: hostDir}}},
				{Name: "disk", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: pvc.Name}}},
			},
		},
	}
	// The API server's Pod Security admission sees the namespace's new
	// label through its cache, a moment later.
	framework.Eventually(t, 30*time.Second, "the copying Pod admitted", func() error {
		return c.Create(ctx, pod.DeepCopy())
	})
	f.WaitPodSucceeded(t, ns, pod.Name, 2*time.Minute)
	if err := c.Delete(ctx, pod); err != nil {
		t.Fatal(err)
	}
	for _, src := range []v1.VolumeSource{
		{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: pvc.Name}}},
		{DataVolume: &v1.DataVolumeSource{Name: pvc.Name}},
	} {
		// The launcher Pod mounts the claim.
		vmi := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "from-pvc"}, Spec: framework.GuestVMI(framework.GuestImage, "from-pvc")}
		vmi.Spec.Volumes[0] = v1.Volume{Name: "containerdisk", VolumeSource: src}
		if err := c.Create(ctx, vmi); err != nil {
			t.Fatal(err)
		}
		framework.WaitVMI(t, c, ns, vmi.Name, 2*time.Minute, "running with its agent", framework.AgentConnected)
		// The hostpath claim is ReadWriteOnce: the VMI says it cannot move.
		framework.WaitVMI(t, c, ns, vmi.Name, 30*time.Second, "not live-migratable for its claim",
			framework.LiveMigratable(corev1.ConditionFalse, v1.VirtualMachineInstanceReasonDisksNotMigratable, "PVC "+pvc.Name+" is not shared"))
		// A migration of it is refused at once, in KubeVirt's words.
		m := &v1.VirtualMachineInstanceMigration{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "move-"}, Spec: v1.VirtualMachineInstanceMigrationSpec{VMIName: vmi.Name}}
		if err := c.Create(ctx, m); err == nil || !strings.Contains(err.Error(), "Cannot migrate VMI, Reason: DisksNotLiveMigratable") {
			t.Errorf("a migration of a VMI on a ReadWriteOnce claim: %v, want it refused naming DisksNotLiveMigratable", err)
		}
		if err := c.Delete(ctx, vmi); err != nil {
			t.Fatal(err)
		}
		framework.WaitGone(t, c, vmi, time.Minute)
	}
}

// TestExecuteInVMOverSSH: generate-ssh-keys makes the key pair, the VM's
// cloud-init installs the public key, and execute-in-vm runs a script over
// SSH (dropbear in the guest, reached at its launcher Pod's address).
func TestExecuteInVMOverSSH(t *testing.T) {
	t.Parallel() // mostly waiting on its own VMs and runs: see "Parallel" in doc.go
	f := framework.New(t)
	c := f.VMClient(t)
	ns := f.Namespace(t)
	ctx := context.Background()
	f.BindTaskRole(t, ns, "generate-ssh-keys")
	f.BindTaskRole(t, ns, "execute-in-vm")
	keys := framework.NewTaskRunRunner(t, f, &pipelinev1.TaskRun{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "generate-ssh-keys-", Namespace: framework.CatalogNamespace},
		Spec: pipelinev1.TaskRunSpec{
			TaskRef:            &pipelinev1.TaskRef{Name: "generate-ssh-keys"},
			ServiceAccountName: "generate-ssh-keys-task",
			Params: pipelinev1.Params{
				{Name: "publicKeySecretNamespace", Value: *pipelinev1.NewStructuredValues(ns)},
				{Name: "privateKeySecretNamespace", Value: *pipelinev1.NewStructuredValues(ns)},
				{Name: "privateKeyConnectionOptions", Value: *pipelinev1.NewStructuredValues("user:root", "disable-strict-host-key-checking:true")},
				// What kubevirt-tekton-tasks users pass: an RSA key named by
				// its signature algorithm, in PEM, without passphrase.
				{Name: "additionalSSHKeygenOptions", Value: *pipelinev1.NewStructuredValues(`-t rsa-sha2-512 -b 3072 -C e2e -m PEM -N ""`)},
			},
		},
	}).CreateTaskRun().ExpectSuccess().Results()
	pub := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: keys["publicKeySecretName"]}, pub); err != nil {
		t.Fatal(err)
	}
	var authorized []string
	for _, v := range pub.Data {
		authorized = append(authorized, "  - "+strings.TrimSpace(string(v)))
	}
	// Port 22 of the launcher Pod's address, which the VMI reports, is the guest's.
	vm := framework.GuestVM(ns, "ssh-target", framework.GuestImage, v1.RunStrategyAlways)
	vm.Spec.Template.Spec.Volumes[1].CloudInitNoCloud.UserData = "#cloud-config\nhostname: ssh-target\nssh_authorized_keys:\n" + strings.Join(authorized, "\n") + "\n"
	if err := c.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
	tr := framework.ExecuteInVMTaskRun(ns, vm.Name, "hostname; echo via-ssh; exit 4", "3m")
	tr.Spec.Params = append(tr.Spec.Params, pipelinev1.Param{Name: "secretName", Value: *pipelinev1.NewStructuredValues(keys["privateKeySecretName"])})
	framework.NewTaskRunRunner(t, f, tr).CreateTaskRun().ExpectFailure("exited with code 4").ExpectLogs("ssh-target", "via-ssh")
	// command and args as kubevirt-tekton-tasks joins them for SSH: one
	// line for the remote shell.
	tr = framework.ExecuteInVMTaskRun(ns, vm.Name, "", "3m")
	tr.Spec.Params = append(tr.Spec.Params[:2],
		pipelinev1.Param{Name: "timeout", Value: *pipelinev1.NewStructuredValues("3m")},
		pipelinev1.Param{Name: "secretName", Value: *pipelinev1.NewStructuredValues(keys["privateKeySecretName"])},
		pipelinev1.Param{Name: "command", Value: pipelinev1.ParamValue{Type: pipelinev1.ParamTypeArray, ArrayVal: []string{"echo"}}},
		pipelinev1.Param{Name: "args", Value: pipelinev1.ParamValue{Type: pipelinev1.ParamTypeArray, ArrayVal: []string{"joined", "$((6 * 7))"}}})
	framework.NewTaskRunRunner(t, f, tr).CreateTaskRun().ExpectSuccess().ExpectLogs("joined 42")
	vmi := &v1.VirtualMachineInstance{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(vm), vmi); err != nil {
		t.Fatal(err)
	}
	if pod := f.LauncherPod(t, vmi); len(vmi.Status.Interfaces) == 0 || vmi.Status.Interfaces[0].IP != pod.Status.PodIP {
		t.Errorf("VMI interfaces %+v, want the launcher Pod's address %s", vmi.Status.Interfaces, pod.Status.PodIP)
	}
}

// TestExecuteInVMStartsAHaltedVM: execute-in-vm on a Halted VM starts it
// (its start subresource), as kubevirt-tekton-tasks does, then runs the
// script through the guest agent.
func TestExecuteInVMStartsAHaltedVM(t *testing.T) {
	t.Parallel() // mostly waiting on its own VMs and runs: see "Parallel" in doc.go
	f := framework.New(t)
	c := f.VMClient(t)
	ns := f.Namespace(t)
	f.BindTaskRole(t, ns, "execute-in-vm")
	vm := framework.GuestVM(ns, "halted", framework.GuestImage, v1.RunStrategyHalted)
	if err := c.Create(context.Background(), vm); err != nil {
		t.Fatal(err)
	}
	framework.NewTaskRunRunner(t, f, framework.ExecuteInVMTaskRun(ns, vm.Name, "echo ran-in-$(hostname)", "4m")).
		CreateTaskRun().ExpectSuccess().ExpectLogs("VirtualMachine "+ns+"/halted was not running \\(Halted\\): started", "ran-in-halted")
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(vm), vm); err != nil {
		t.Fatal(err)
	}
	if rs, _ := vm.RunStrategy(); rs != v1.RunStrategyAlways {
		t.Errorf("run strategy after the start: %s, want Always", rs)
	}

	// cleanup-vm runs its script first: a failing one leaves the VM
	// running; a passing one is followed by the stop and the delete.
	f.BindTaskRole(t, ns, "cleanup-vm")
	cleanup := func(script string) *pipelinev1.TaskRun {
		return framework.CatalogTaskRun("cleanup-vm", map[string]any{"vmName": vm.Name, "vmNamespace": ns, "script": script, "delete": "true", "timeout": "4m"})
	}
	framework.NewTaskRunRunner(t, f, cleanup("echo last-words; exit 3")).CreateTaskRun().ExpectFailure("exited with code 3").ExpectLogs("last-words")
	vmi := &v1.VirtualMachineInstance{}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(vm), vmi); err != nil || vmi.Status.Phase != v1.Running {
		t.Fatalf("after a failing cleanup command the VMI is %v (%v), want still Running", vmi.Status.Phase, err)
	}
	framework.NewTaskRunRunner(t, f, cleanup("echo bye-from-$(hostname)")).CreateTaskRun().ExpectSuccess().
		ExpectLogs("bye-from-halted", "VirtualMachine "+ns+"/halted stopped", "VirtualMachine "+ns+"/halted deleted")
}

// TestCreateVMFromVirtctlFlags: create-vm-from-manifest with virtctl
// create vm flags (instancetype, preference, containerDisk, cloud-init)
// makes a VM that boots: the guest answers with the hostname cloud-init
// gave it.
func TestCreateVMFromVirtctlFlags(t *testing.T) {
	t.Parallel() // mostly waiting on its own VMs and runs: see "Parallel" in doc.go
	f := framework.New(t)
	c := f.VMClient(t)
	ns := f.Namespace(t)
	f.BindTaskRole(t, ns, "create-vm-from-manifest")
	f.BindTaskRole(t, ns, "execute-in-vm")
	userData := base64.StdEncoding.EncodeToString([]byte("#cloud-config\nhostname: from-flags\n"))
	flags := "create vm --name vctl --instancetype u1.nano --preference tekvirt.guest --volume-containerdisk src:" + framework.GuestImage +
		",name:containerdisk --cloud-init-user-data " + userData
	framework.NewTaskRunRunner(t, f, framework.CatalogTaskRun("create-vm-from-manifest", map[string]any{"virtctl": flags, "namespace": ns})).CreateTaskRun().ExpectSuccess().ExpectLogs("VirtualMachine " + ns + "/vctl created")
	framework.NewTaskRunRunner(t, f, framework.ExecuteInVMTaskRun(ns, "vctl", "hostname", "4m")).CreateTaskRun().ExpectSuccess().ExpectLogs("from-flags")
	vm := &v1.VirtualMachine{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "vctl"}, vm); err != nil {
		t.Fatal(err)
	}
	if vm.Spec.Instancetype == nil || vm.Spec.Instancetype.Name != "u1.nano" || vm.Status.InstancetypeRef == nil {
		t.Errorf("instancetype %+v, captured %+v", vm.Spec.Instancetype, vm.Status.InstancetypeRef)
	}
}
