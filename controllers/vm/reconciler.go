package vm

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
)

// NameLabel marks a VMI with the name of the VM it runs, as KubeVirt does.
const NameLabel = "vm.kubevirt.io/name"

// Reconciler keeps each VM's VMI as its run strategy says.
type Reconciler struct {
	Client client.Client
	// Reader reads what is read only when a VM starts (instancetypes,
	// preferences, their ControllerRevisions) from the API server, not a
	// cache of every one in the cluster.
	Reader client.Reader
	// Recorder records the VM's events under KubeVirt's reasons (its VMI
	// created or deleted, its DataVolumes created).
	Recorder events.EventRecorder
}

// +kubebuilder:rbac:groups=kubevirt.io,resources=virtualmachines,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=kubevirt.io,resources=virtualmachines/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=kubevirt.io,resources=virtualmachineinstances,verbs=get;list;watch;create;delete

// Reconcile acts on the VMI of one VM and reports it in the VM's status.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	vm := &v1.VirtualMachine{}
	if err := r.Client.Get(ctx, req.NamespacedName, vm); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	vmi, err := r.vmiOf(ctx, vm)
	if err != nil {
		return ctrl.Result{}, err
	}
	if len(vm.Status.VolumeRequests) > 0 {
		// Before anything starts a VMI from the template: a new VMI has the
		// volumes the requests asked for.
		return ctrl.Result{}, r.applyVolumeRequests(ctx, vm, vmi)
	}
	base := vm.DeepCopy()
	rs, failure := vm.RunStrategy()
	var volumes v1.VirtualMachinePrintableStatus
	defer func() {
		setStatus(vm, rs, vmi, failure, metav1.Now())
		withVolumesStatus(vm, vmi, volumes)
		reterr = errors.Join(reterr, r.patchStatus(ctx, base, vm, vmi))
	}()
	if failure != nil || vm.DeletionTimestamp != nil {
		return ctrl.Result{}, nil // owner references delete the VMI with the VM
	}
	act, failure := decide(vm, rs, vmi)
	if failure != nil {
		return ctrl.Result{}, nil
	}
	now := metav1.Now()
	switch act {
	case actCreate:
		var wait time.Duration
		if vmi, volumes, wait, failure = r.start(ctx, vm, now); wait > 0 {
			return ctrl.Result{RequeueAfter: wait}, nil
		}
	case actDelete:
		if noteFailure(vm, rs, vmi, now) {
			// Stored before the VMI goes: a RerunOnFailure VM with neither
			// its VMI nor the start request never starts again, and a lost
			// count would shorten the backoff.
			if failure = r.patchStatus(ctx, base, vm, vmi); failure != nil {
				break
			}
			base = vm.DeepCopy()
		}
		failure = r.delete(ctx, vm, vmi)
	case actHalt:
		if failure = r.halt(ctx, vm); failure == nil {
			rs, base = v1.RunStrategyHalted, vm.DeepCopy()
			failure = r.delete(ctx, vm, vmi)
		}
	}
	return ctrl.Result{}, failure
}

// withVolumesStatus shows what the VM's DataVolumes hold its start for
// (Provisioning, DataVolumeError) while it has no VMI.
func withVolumesStatus(vm *v1.VirtualMachine, vmi *v1.VirtualMachineInstance, volumes v1.VirtualMachinePrintableStatus) {
	if vmi == nil && volumes != "" {
		vm.Status.PrintableStatus = volumes
	}
}

// halt sets the VM's run strategy to Halted (a Once VM whose run ended).
func (r *Reconciler) halt(ctx context.Context, vm *v1.VirtualMachine) error {
	halted := v1.RunStrategyHalted
	patch := client.MergeFrom(vm.DeepCopy())
	vm.Spec.RunStrategy = &halted
	return r.Client.Patch(ctx, vm, patch)
}

// patchStatus writes vm's status, dropping the requests vmi shows done.
func (r *Reconciler) patchStatus(ctx context.Context, base, vm *v1.VirtualMachine, vmi *v1.VirtualMachineInstance) error {
	vm.Status.StateChangeRequests = doneRequests(vm.Status.StateChangeRequests, vmi)
	patch := client.MergeFrom(base)
	if !equality.Semantic.DeepEqual(vm.Status.StateChangeRequests, base.Status.StateChangeRequests) {
		// The subresource API adds requests meanwhile: never drop one this
		// reconcile did not see.
		patch = client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})
	}
	if err := r.Client.Status().Patch(ctx, vm, patch); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("patching status of %s: %w", klog.KObj(vm), err)
	}
	return nil
}

// start creates the VMI unless the crash-loop backoff (a wait) or the
// DataVolumes (Provisioning, DataVolumeError) hold it back; their changes
// bring the VM back here.
func (r *Reconciler) start(ctx context.Context, vm *v1.VirtualMachine, now metav1.Time) (*v1.VirtualMachineInstance, v1.VirtualMachinePrintableStatus, time.Duration, error) {
	if wait := retryWait(&vm.Status, now); wait > 0 {
		return nil, "", wait, nil
	}
	volumes, msg, err := r.ensureDataVolumes(ctx, vm)
	switch {
	case err != nil:
		return nil, "", 0, err
	case msg != "":
		return nil, volumes, 0, errors.New(msg)
	case volumes != "":
		return nil, volumes, 0, nil
	}
	vmi, err := r.create(ctx, vm)
	return vmi, "", 0, err
}

// noteFailure counts a failed VMI, about to be deleted so that a new one can
// start, for the crash-loop backoff; a failed VMI of a RerunOnFailure VM is
// followed by a start request, as KubeVirt restarts only those. It reports
// whether vmi failed (and vm's status changed).
func noteFailure(vm *v1.VirtualMachine, rs v1.VirtualMachineRunStrategy, vmi *v1.VirtualMachineInstance, now metav1.Time) bool {
	if vmi.Status.Phase != v1.Failed {
		return false
	}
	recordStartFailure(&vm.Status, vmi, now)
	if rs == v1.RunStrategyRerunOnFailure && !startRequested(vm.Status.StateChangeRequests) {
		vm.Status.StateChangeRequests = append(vm.Status.StateChangeRequests, v1.VirtualMachineStateChangeRequest{Action: v1.StartRequest})
	}
	return true
}

// vmiOf returns the VMI of vm, or nil. A VMI of that name that another
// object controls is an error: the VM never takes it over.
func (r *Reconciler) vmiOf(ctx context.Context, vm *v1.VirtualMachine) (*v1.VirtualMachineInstance, error) {
	vmi := &v1.VirtualMachineInstance{}
	err := r.Client.Get(ctx, client.ObjectKeyFromObject(vm), vmi)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the VMI of %s: %w", klog.KObj(vm), err)
	}
	if ref := metav1.GetControllerOf(vmi); ref == nil || ref.UID != vm.UID {
		return nil, fmt.Errorf("VMI %s exists and is not controlled by VM %s", klog.KObj(vmi), klog.KObj(vm))
	}
	return vmi, nil
}

func (r *Reconciler) create(ctx context.Context, vm *v1.VirtualMachine) (*v1.VirtualMachineInstance, error) {
	tmpl := vm.Spec.Template
	if tmpl == nil {
		return nil, fmt.Errorf("spec.template is required to start %s", klog.KObj(vm))
	}
	spec, err := r.expandedSpec(ctx, vm)
	if err != nil {
		return nil, err
	}
	vmi := &v1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{
			Name: vm.Name, Namespace: vm.Namespace,
			Labels: map[string]string{}, Annotations: map[string]string{},
		},
		Spec: *spec,
	}
	for k, v := range tmpl.ObjectMeta.Labels {
		vmi.Labels[k] = v
	}
	for k, v := range tmpl.ObjectMeta.Annotations {
		vmi.Annotations[k] = v
	}
	vmi.Labels[NameLabel] = vm.Name
	if err := controllerutil.SetControllerReference(vm, vmi, r.Client.Scheme()); err != nil {
		return nil, err
	}
	if err := r.Client.Create(ctx, vmi); err != nil {
		r.event(vm, corev1.EventTypeWarning, "FailedCreate", "Error creating virtual machine instance: %v", err)
		return nil, fmt.Errorf("creating the VMI of %s: %w", klog.KObj(vm), err)
	}
	r.event(vm, corev1.EventTypeNormal, "SuccessfulCreate", "Started the virtual machine by creating the new virtual machine instance %s", vmi.Name)
	ctrl.LoggerFrom(ctx).Info("created VMI", "vmi", klog.KObj(vmi))
	return vmi, nil
}

func (r *Reconciler) delete(ctx context.Context, vm *v1.VirtualMachine, vmi *v1.VirtualMachineInstance) error {
	err := r.Client.Delete(ctx, vmi, client.Preconditions{UID: &vmi.UID})
	if err != nil && !apierrors.IsNotFound(err) {
		r.event(vm, corev1.EventTypeWarning, "FailedDelete", "Error deleting virtual machine instance %s: %v", vmi.Name, err)
		return fmt.Errorf("deleting VMI %s: %w", klog.KObj(vmi), err)
	}
	if err == nil {
		r.event(vm, corev1.EventTypeNormal, "SuccessfulDelete", "Stopped the virtual machine by deleting the virtual machine instance %s", vmi.UID)
	}
	ctrl.LoggerFrom(ctx).Info("deleted VMI", "vmi", klog.KObj(vmi), "phase", vmi.Status.Phase)
	return nil
}

// event records an event on vm, when there is a recorder.
func (r *Reconciler) event(vm *v1.VirtualMachine, kind, reason, format string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(vm, nil, kind, reason, reason, format, args...)
	}
}

// SetupWithManager watches VMs and the VMIs they own.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("virtualmachine").
		For(&v1.VirtualMachine{}).
		Owns(&v1.VirtualMachineInstance{}).
		Owns(&cdiv1.DataVolume{}).
		Complete(r)
}
