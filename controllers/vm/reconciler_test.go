package vm

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"
	instancetypev1beta1 "kubevirt.io/api/instancetype/v1beta1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/tekvirt/tekvirt/controllers/requester"
	"github.com/tekvirt/tekvirt/controllers/testenv"
)

func start(t *testing.T) client.Client {
	t.Helper()
	crd := filepath.Join("..", "config", "crd")
	cfg := testenv.Start(t, filepath.Join(crd, "kubevirt.io_virtualmachines.yaml"), filepath.Join(crd, "kubevirt.io_virtualmachineinstances.yaml"),
		filepath.Join(crd, "cdi.kubevirt.io_datavolumes.yaml"),
		filepath.Join(crd, "instancetype.kubevirt.io_virtualmachineclusterinstancetypes.yaml"),
		filepath.Join(crd, "instancetype.kubevirt.io_virtualmachinepreferences.yaml"),
		filepath.Join(crd, "instancetype.kubevirt.io_virtualmachineclusterpreferences.yaml"))
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := cdiv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := instancetypev1beta1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	return testenv.StartManager(t, cfg, scheme, func(mgr ctrl.Manager) error {
		return (&Reconciler{Client: mgr.GetClient(), Reader: mgr.GetAPIReader()}).SetupWithManager(mgr)
	})
}

func newVM(name string, rs v1.VirtualMachineRunStrategy) *v1.VirtualMachine {
	return &v1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: v1.VirtualMachineSpec{
			RunStrategy: &rs,
			Template: &v1.VirtualMachineInstanceTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"kubevirt.io/size": "small"}},
				Spec: v1.VirtualMachineInstanceSpec{Domain: v1.DomainSpec{
					Resources: v1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}},
				}},
			},
		},
	}
}

// setPhase plays the node handler's part, through the status subresource.
func setPhase(t *testing.T, c client.Client, key types.NamespacedName, phase v1.VirtualMachineInstancePhase, ready bool) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		vmi := &v1.VirtualMachineInstance{}
		if err := c.Get(context.Background(), key, vmi); err != nil {
			return err
		}
		vmi.Status.Phase = phase
		if ready {
			vmi.Status.Conditions = []v1.VirtualMachineInstanceCondition{{Type: v1.VirtualMachineInstanceReady, Status: corev1.ConditionTrue, Reason: "AgentConnected"}}
		}
		return c.Status().Update(context.Background(), vmi)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func vmState(c client.Client, key types.NamespacedName) (*v1.VirtualMachine, *v1.VirtualMachineInstance, error) {
	vm := &v1.VirtualMachine{}
	if err := c.Get(context.Background(), key, vm); err != nil {
		return nil, nil, err
	}
	vmi := &v1.VirtualMachineInstance{}
	if err := c.Get(context.Background(), key, vmi); apierrors.IsNotFound(err) {
		return vm, nil, nil
	} else if err != nil {
		return nil, nil, err
	}
	return vm, vmi, nil
}

func TestAlwaysRestartsAndHaltedStops(t *testing.T) {
	c := start(t)
	ctx := context.Background()
	vm := newVM("always", v1.RunStrategyAlways)
	if err := c.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(vm)
	var first types.UID
	testenv.Eventually(t, "VMI created and VM Starting", func() error {
		got, vmi, err := vmState(c, key)
		if err != nil || vmi == nil {
			return fmt.Errorf("no VMI yet: %w", err)
		}
		if ref := metav1.GetControllerOf(vmi); ref == nil || ref.UID != got.UID || vmi.Labels[NameLabel] != "always" || vmi.Labels["kubevirt.io/size"] != "small" {
			return fmt.Errorf("VMI metadata %+v", vmi.ObjectMeta)
		}
		if got.Status.PrintableStatus != v1.VirtualMachineStatusStarting || !got.Status.Created {
			return fmt.Errorf("VM status %+v", got.Status)
		}
		first = vmi.UID
		return nil
	})
	setPhase(t, c, key, v1.Running, true)
	testenv.Eventually(t, "VM Running and Ready", func() error {
		got, _, err := vmState(c, key)
		if err != nil {
			return err
		}
		if got.Status.PrintableStatus != v1.VirtualMachineStatusRunning || !got.Status.Ready {
			return fmt.Errorf("VM status %+v", got.Status)
		}
		return nil
	})
	setPhase(t, c, key, v1.Failed, false)
	testenv.Eventually(t, "failed VMI replaced", func() error {
		_, vmi, err := vmState(c, key)
		if err != nil || vmi == nil || vmi.UID == first {
			return fmt.Errorf("VMI not replaced yet: %w", err)
		}
		return nil
	})
	// The controller writes the VM's status meanwhile: a user's edit that
	// meets a Conflict is made again, as kubectl edit would be.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		got := &v1.VirtualMachine{}
		if err := c.Get(ctx, key, got); err != nil {
			return err
		}
		halted := v1.RunStrategyHalted
		got.Spec.RunStrategy = &halted
		return c.Update(ctx, got)
	})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "Halted VM Stopped without VMI", func() error {
		got, vmi, err := vmState(c, key)
		if err != nil {
			return err
		}
		if vmi != nil || got.Status.PrintableStatus != v1.VirtualMachineStatusStopped || got.Status.Created {
			return fmt.Errorf("VMI %v, VM status %+v", vmi != nil, got.Status)
		}
		return nil
	})
}

func TestOnceHaltsAfterTheRun(t *testing.T) {
	c := start(t)
	vm := newVM("once", v1.RunStrategyOnce)
	if err := c.Create(context.Background(), vm); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(vm)
	testenv.Eventually(t, "VMI created", func() error {
		_, vmi, err := vmState(c, key)
		if err != nil || vmi == nil {
			return fmt.Errorf("no VMI: %w", err)
		}
		return nil
	})
	setPhase(t, c, key, v1.Succeeded, false)
	testenv.Eventually(t, "run strategy Halted and VMI gone", func() error {
		got, vmi, err := vmState(c, key)
		if err != nil {
			return err
		}
		if vmi != nil || got.Spec.RunStrategy == nil || *got.Spec.RunStrategy != v1.RunStrategyHalted || got.Status.PrintableStatus != v1.VirtualMachineStatusStopped {
			return fmt.Errorf("VMI %v, runStrategy %v, status %s", vmi != nil, got.Spec.RunStrategy, got.Status.PrintableStatus)
		}
		return nil
	})
}

func TestRunningAndRunStrategyTogetherFail(t *testing.T) {
	c := start(t)
	vm := newVM("both", v1.RunStrategyAlways)
	running := true
	vm.Spec.Running = &running
	if err := c.Create(context.Background(), vm); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(vm)
	testenv.Eventually(t, "Failure condition naming the fields", func() error {
		got, vmi, err := vmState(c, key)
		if err != nil {
			return err
		}
		if vmi != nil {
			t.Fatal("a VMI was created for a VM with conflicting fields")
		}
		for _, cond := range got.Status.Conditions {
			if cond.Type == v1.VirtualMachineFailure && cond.Status == corev1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("conditions %+v", got.Status.Conditions)
	})
}

// TestDataVolumeTemplatesComeFirst: the VM creates its DataVolumes, shows
// Provisioning, starts only once they succeeded, and shows DataVolumeError
// when one fails.
func TestDataVolumeTemplatesComeFirst(t *testing.T) {
	c := start(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		phase cdiv1.DataVolumePhase
		want  v1.VirtualMachinePrintableStatus
	}{{"dvt-ok", cdiv1.Succeeded, v1.VirtualMachineStatusStarting}, {"dvt-bad", cdiv1.Failed, v1.VirtualMachineStatusDataVolumeError}} {
		vm := newVM(tc.name, v1.RunStrategyAlways)
		// What the requester webhook recorded on the VM; a record written
		// into the template itself must not reach the DataVolume.
		alice := `{"username":"alice"}`
		vm.Annotations = map[string]string{requester.Annotation: alice}
		vm.Spec.DataVolumeTemplates = []v1.DataVolumeTemplateSpec{{
			ObjectMeta: metav1.ObjectMeta{Name: tc.name + "-disk",
				Annotations: map[string]string{requester.Annotation: `{"username":"admin"}`, "example.com/kept": "yes"}},
			Spec: cdiv1.DataVolumeSpec{Source: &cdiv1.DataVolumeSource{Blank: &cdiv1.DataVolumeBlankImage{}},
				Storage: &cdiv1.StorageSpec{Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}},
		}}
		if err := c.Create(ctx, vm); err != nil {
			t.Fatal(err)
		}
		dv := &cdiv1.DataVolume{}
		testenv.Eventually(t, tc.name+": DataVolume created, VM Provisioning", func() error {
			if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: tc.name + "-disk"}, dv); err != nil {
				return err
			}
			if err := c.Get(ctx, client.ObjectKeyFromObject(vm), vm); err != nil {
				return err
			}
			if vm.Status.PrintableStatus != v1.VirtualMachineStatusProvisioning {
				return fmt.Errorf("printableStatus %q", vm.Status.PrintableStatus)
			}
			return nil
		})
		if !metav1.IsControlledBy(dv, vm) {
			t.Errorf("%s: DataVolume not owned by the VM", tc.name)
		}
		if dv.Annotations[requester.Annotation] != alice || dv.Annotations["example.com/kept"] != "yes" {
			t.Errorf("%s: DataVolume annotations %v, want the VM's requester and the template's other annotations", tc.name, dv.Annotations)
		}
		vmi := &v1.VirtualMachineInstance{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(vm), vmi); err == nil {
			t.Fatalf("%s: VMI created before its DataVolume succeeded", tc.name)
		}
		dv.Status.Phase = tc.phase
		if err := c.Status().Update(ctx, dv); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, tc.name+": VM "+string(tc.want), func() error {
			if err := c.Get(ctx, client.ObjectKeyFromObject(vm), vm); err != nil {
				return err
			}
			if vm.Status.PrintableStatus != tc.want {
				return fmt.Errorf("printableStatus %q", vm.Status.PrintableStatus)
			}
			return nil
		})
	}
}

// request appends a state change request to the VM's status, as the
// subresource API does.
func request(t *testing.T, c client.Client, key types.NamespacedName, r v1.VirtualMachineStateChangeRequest) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		vm := &v1.VirtualMachine{}
		if err := c.Get(context.Background(), key, vm); err != nil {
			return err
		}
		vm.Status.StateChangeRequests = append(vm.Status.StateChangeRequests, r)
		return c.Status().Update(context.Background(), vm)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// settled waits for the VM to have a VMI (or none) and no request left.
func settled(t *testing.T, c client.Client, key types.NamespacedName, what string, wantVMI bool) *v1.VirtualMachineInstance {
	t.Helper()
	var vmi *v1.VirtualMachineInstance
	testenv.Eventually(t, what, func() error {
		got, i, err := vmState(c, key)
		if err != nil {
			return err
		}
		if (i != nil) != wantVMI || len(got.Status.StateChangeRequests) != 0 {
			return fmt.Errorf("VMI %v, requests %+v", i != nil, got.Status.StateChangeRequests)
		}
		vmi = i
		return nil
	})
	return vmi
}

func TestStateChangeRequests(t *testing.T) {
	c := start(t)
	manual := newVM("manual", v1.RunStrategyManual)
	if err := c.Create(context.Background(), manual); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(manual)
	settled(t, c, key, "a Manual VM waits for a request", false)
	request(t, c, key, v1.VirtualMachineStateChangeRequest{Action: v1.StartRequest})
	vmi := settled(t, c, key, "started on request", true)
	request(t, c, key, v1.VirtualMachineStateChangeRequest{Action: v1.StopRequest, UID: &vmi.UID})
	settled(t, c, key, "stopped on request", false)

	rerun := newVM("rerun", v1.RunStrategyRerunOnFailure)
	if err := c.Create(context.Background(), rerun); err != nil {
		t.Fatal(err)
	}
	key = client.ObjectKeyFromObject(rerun)
	first := settled(t, c, key, "a RerunOnFailure VM starts", true)
	setPhase(t, c, key, v1.Failed, false)
	testenv.Eventually(t, "a failed VMI replaced", func() error {
		_, vmi, err := vmState(c, key)
		if err != nil || vmi == nil || vmi.UID == first.UID {
			return fmt.Errorf("VMI %v: %w", vmi, err)
		}
		return nil
	})
	settled(t, c, key, "its start request done", true)
	setPhase(t, c, key, v1.Succeeded, false)
	settled(t, c, key, "a VMI that succeeded removed, not restarted", false)
}
