package handler

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	crhandler "sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/source"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/contracts/launcherpod"
	"github.com/tekvirt/tekvirt/runtime/containerdisk"
	"github.com/tekvirt/tekvirt/runtime/launcher"
)

// Finalizer keeps a VMI until the handler has destroyed its domain and
// removed its files.
const Finalizer = launcherpod.HandlerFinalizer

// How often a running VMI is looked at: often until its guest agent
// answers, which is what users wait for, then rarely. A migration's
// steps are looked at more often: its guest's downtime does not wait
// for them, but the migration's end and the next migration do.
const (
	pollStarting  = 300 * time.Millisecond
	pollRunning   = 5 * time.Second
	pollPending   = 5 * time.Second
	pollTarget    = 100 * time.Millisecond
	pollMigrating = 200 * time.Millisecond
)

// Handler runs the VMIs placed on one node.
type Handler struct {
	Client client.Client
	// Recorder records the VMI's events, as KubeVirt's virt-handler does
	// (nil: none).
	Recorder events.EventRecorder
	// Reader reads from the API server, past the cache (nil: never).
	Reader client.Reader
	// Node is this node's name.
	Node string
	// Root holds vms/<uid>/ and the image cache images/.
	Root string
	// KubeletRoot is the kubelet's root directory (--root-dir), where it
	// keeps launcher Pods' volumes; empty means /var/lib/kubelet.
	KubeletRoot string
	// KVM runs guests with hardware virtualization instead of TCG.
	KVM bool
	// ExecAddress is where this node serves guest exec (host:port), noted
	// on each VMI it runs; empty when exec is off.
	ExecAddress string
	// ContainerDiskMaxBytes caps what one containerDisk may extract to;
	// ContainerDiskIdle is how long an image no VM uses stays cached.
	ContainerDiskMaxBytes int64
	ContainerDiskIdle     time.Duration
	// Migrations carry live migrations to and from this node (nil: none).
	Migrations *Migrations
	// MigrationClientTLS is the TLS a source dials a target node's
	// handler with, for the node's name.
	MigrationClientTLS func(node string) *tls.Config
	// TargetReader reads the VMIs migrating to this node (labelled with
	// it as their migration's target), which Client's cache does not hold.
	TargetReader client.Reader
	// QEMUCapabilitiesDir holds the node's QEMU capabilities files, which
	// the handler Pod's init container probed with the launcher image;
	// each launcher Pod gets a copy (empty: none, launchers probe QEMU).
	QEMUCapabilitiesDir string

	// wake has a VMI reconciled at once, from outside the watch: a
	// migration from this node ended.
	wake chan event.TypedGenericEvent[*v1.VirtualMachineInstance]

	// consoles are the VMIs (by directory) whose serial console is attached.
	consoles sync.Map
	// displays are the VMIs (by directory) with a VNC session open, each
	// to the session's client connection.
	displays sync.Map
}

// images is the node's containerDisk cache.
func (h *Handler) images() containerdisk.Cache {
	return containerdisk.Cache{Dir: filepath.Join(h.Root, "images"), MaxImageBytes: h.ContainerDiskMaxBytes}
}

// +kubebuilder:rbac:groups=kubevirt.io,resources=virtualmachineinstances,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=kubevirt.io,resources=virtualmachineinstances/status,verbs=get;patch
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims;persistentvolumes,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile drives one VMI on this node toward its spec and reports it.
func (h *Handler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	vmi, err := h.get(ctx, req.NamespacedName)
	if vmi == nil || err != nil {
		return ctrl.Result{}, err
	}
	if vmi.Status.NodeName != h.Node {
		// This node may be the target of the VMI's migration.
		return h.reconcileTarget(ctx, vmi)
	}
	d, err := h.dirFor(vmi)
	if err != nil {
		return ctrl.Result{}, err
	}
	if vmi.DeletionTimestamp != nil {
		return ctrl.Result{}, h.teardown(ctx, vmi, d)
	}
	if finished(vmi) {
		return ctrl.Result{}, h.release(ctx, vmi, d)
	}
	if stale, err := h.staleLaunch(ctx, vmi, d); stale || err != nil {
		return ctrl.Result{RequeueAfter: time.Second}, err
	}
	return h.follow(ctx, vmi, d)
}

// follow observes the VMI's launcher, reports it, and carries out a
// migration away from this node.
func (h *Handler) follow(ctx context.Context, vmi *v1.VirtualMachineInstance, d vmDir) (ctrl.Result, error) {
	obs, requeue, err := h.observe(ctx, vmi, d)
	if err != nil {
		return ctrl.Result{}, err
	}
	if obs.exit != nil && obs.exit.Reason == launcher.ReasonMigrated {
		// The VM runs on at the migration's target, which takes it over.
		return ctrl.Result{RequeueAfter: pollStarting}, h.migratedAway(ctx, vmi, obs.exit)
	}
	if err := h.report(ctx, vmi, obs); err != nil {
		return ctrl.Result{}, err
	}
	if err := h.driveSource(ctx, vmi, d, obs); err != nil {
		return ctrl.Result{}, err
	}
	if err := h.syncHotplug(ctx, vmi, d, obs.status); err != nil {
		return ctrl.Result{}, err
	}
	if hotplugPending(vmi) && requeue > pollStarting {
		requeue = pollStarting
	}
	if migrating(vmi) != nil {
		requeue = pollMigrating
	}
	return ctrl.Result{RequeueAfter: requeue}, nil
}

// get reads the VMI from the cache of this node's VMIs, else from that of
// the VMIs migrating to this node (nil: in neither).
func (h *Handler) get(ctx context.Context, key client.ObjectKey) (*v1.VirtualMachineInstance, error) {
	vmi := &v1.VirtualMachineInstance{}
	err := h.Client.Get(ctx, key, vmi)
	if apierrors.IsNotFound(err) && h.TargetReader != nil {
		err = h.TargetReader.Get(ctx, key, vmi)
	}
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return vmi, nil
}

// staleLaunch reports whether vmi, read from the cache, would be launched
// although the API server already has it past Scheduled: a reconcile that
// failed it for good (and removed its directory) is not in the cache yet,
// and preparing it again would pull and extract its images a second time.
func (h *Handler) staleLaunch(ctx context.Context, vmi *v1.VirtualMachineInstance, d vmDir) (bool, error) {
	if h.Reader == nil || vmi.Status.Phase != v1.Scheduled {
		return false, nil
	}
	if state, _, err := d.state(); err != nil || state != NotStarted {
		return false, nil
	}
	live := &v1.VirtualMachineInstance{}
	if err := h.Reader.Get(ctx, client.ObjectKeyFromObject(vmi), live); err != nil {
		return true, client.IgnoreNotFound(err)
	}
	return live.UID != vmi.UID || live.Status.Phase != v1.Scheduled || live.DeletionTimestamp != nil, nil
}

// observe starts the launcher if it is due and reads its state.
func (h *Handler) observe(ctx context.Context, vmi *v1.VirtualMachineInstance, d vmDir) (observation, time.Duration, error) {
	state, exit, err := d.state()
	if err != nil {
		return observation{}, 0, err
	}
	obs := observation{state: state, exit: exit}
	switch state {
	case NotStarted:
		if vmi.Status.Phase != v1.Scheduled {
			// Running without a directory: the node lost the VM.
			obs.state = Lost
			return obs, 0, nil
		}
		if err := h.launch(ctx, vmi, d); err != nil {
			obs.prepareErr = err
			var perm *permanentError
			if errors.As(err, &perm) {
				return obs, 0, d.remove()
			}
			if errors.Is(err, errPodNotHere) {
				// The kubelet sets the Pod's volumes up within moments of
				// its binding: looking again in 5 s would be the VM's
				// longest wait.
				return obs, pollStarting, nil
			}
			ctrl.LoggerFrom(ctx).Info("volumes not ready", "vmi", klog.KObj(vmi), "reason", err.Error())
			return obs, pollPending, nil
		}
		return obs, pollStarting, nil
	case Running:
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		st, err := d.client().Status(cctx)
		if err != nil {
			return obs, pollStarting, nil // still starting
		}
		obs.status = st
		if st.AgentConnected {
			return obs, pollRunning, nil
		}
		return obs, pollStarting, nil
	}
	return obs, 0, nil
}

// launch prepares the VM's files in its launcher Pod and writes the spec
// the launcher there waits for; it runs QEMU on a libvirtd of its own, in
// the Pod's cgroup and network.
func (h *Handler) launch(ctx context.Context, vmi *v1.VirtualMachineInstance, d vmDir) error {
	// Nothing is on the node before the Pod's volumes are; this is polled
	// often, so it costs no API call.
	if err := d.pod.ready(); err != nil {
		return err
	}
	base := vmi.DeepCopy()
	controllerutil.AddFinalizer(vmi, Finalizer)
	if h.ExecAddress != "" {
		metav1.SetMetaDataAnnotation(&vmi.ObjectMeta, AddressAnnotation, h.ExecAddress)
	}
	if !equality.Semantic.DeepEqual(base.ObjectMeta, vmi.ObjectMeta) {
		if err := h.Client.Patch(ctx, vmi, client.MergeFrom(base)); err != nil {
			return fmt.Errorf("adding the finalizer to %s: %w", klog.KObj(vmi), err)
		}
	}
	spec, err := h.stagedSpec(ctx, vmi, d)
	if err != nil {
		return err
	}
	if err := d.writeSpec(spec); err != nil {
		return err
	}
	ctrl.LoggerFrom(ctx).Info("VM prepared for its launcher Pod", "vmi", klog.KObj(vmi), "pod volume", d.pod.vm.Path)
	return nil
}

// stagedSpec prepares the VM in stages while the kubelet starts its
// launcher Pod, each stage as soon as it can be done: the prelude (the
// launcher starts its libvirtd), the disks, once, then, when the launcher
// answers, the network, which needs the Pod's network namespace. It
// returns the spec, or errPodNotHere until the launcher answers.
func (h *Handler) stagedSpec(ctx context.Context, vmi *v1.VirtualMachineInstance, d vmDir) (*launcher.Spec, error) {
	if err := d.create(); err != nil {
		return nil, err
	}
	if _, err := h.writePrelude(d); err != nil {
		return nil, err
	}
	if _, err := h.prepareOnce(ctx, vmi, d); err != nil {
		return nil, err
	}
	ns, err := d.podNetNS(ctx)
	if err != nil {
		return nil, err
	}
	_ = ns.Close()
	return h.specFor(ctx, vmi, d)
}

// specFor prepares the VM's files and network in its launcher Pod and
// returns the spec its launcher runs.
func (h *Handler) specFor(ctx context.Context, vmi *v1.VirtualMachineInstance, d vmDir) (*launcher.Spec, error) {
	opts, err := h.prepareOnce(ctx, vmi, d)
	if err != nil {
		return nil, err
	}
	if opts.Interfaces, err = h.plugNetwork(ctx, vmi, d); err != nil {
		return nil, err
	}
	caps, err := h.writePrelude(d)
	if err != nil {
		return nil, err
	}
	return &launcher.Spec{VMI: vmi, Options: opts, QEMUCapabilities: caps}, nil
}

// report patches the VMI's status when it changed.
func (h *Handler) report(ctx context.Context, vmi *v1.VirtualMachineInstance, obs observation) error {
	st := nextStatus(vmi, obs, metav1.Now())
	if equality.Semantic.DeepEqual(ignoreProbeTimes(st), ignoreProbeTimes(vmi.Status)) {
		return nil
	}
	base := vmi.DeepCopy()
	vmi.Status = st
	if err := h.Client.Status().Patch(ctx, vmi, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("reporting the status of %s: %w", klog.KObj(vmi), err)
	}
	if base.Status.Phase != st.Phase {
		ctrl.LoggerFrom(ctx).Info("VMI phase", "vmi", klog.KObj(vmi), "phase", st.Phase)
		h.phaseEvent(vmi, st)
	}
	h.credentialsEvent(vmi, base.Status, st)
	return nil
}

// credentialsEvent records a change of the AccessCredentialsSynchronized
// condition as KubeVirt's virt-handler does.
func (h *Handler) credentialsEvent(vmi *v1.VirtualMachineInstance, old, st v1.VirtualMachineInstanceStatus) {
	was, now := findCond(old, v1.VirtualMachineInstanceAccessCredentialsSynchronized), findCond(st, v1.VirtualMachineInstanceAccessCredentialsSynchronized)
	if h.Recorder == nil || now == nil || was != nil && was.Status == now.Status && was.Message == now.Message {
		return
	}
	if now.Status == corev1.ConditionTrue {
		h.Recorder.Eventf(vmi, nil, corev1.EventTypeNormal, string(v1.AccessCredentialsSyncSuccess), "Sync", "Access credentials sync successful.")
		return
	}
	h.Recorder.Eventf(vmi, nil, corev1.EventTypeWarning, string(v1.AccessCredentialsSyncFailed), "Sync", "Access credentials sync failed: %s", now.Message)
}

// phaseEvent records the VMI's new phase as KubeVirt's virt-handler does:
// started, shut down, or failed with the Ready condition's reason.
func (h *Handler) phaseEvent(vmi *v1.VirtualMachineInstance, st v1.VirtualMachineInstanceStatus) {
	if h.Recorder == nil {
		return
	}
	switch st.Phase {
	case v1.Running:
		h.Recorder.Eventf(vmi, nil, corev1.EventTypeNormal, "Started", "Start", "VirtualMachineInstance started.")
	case v1.Succeeded:
		h.Recorder.Eventf(vmi, nil, corev1.EventTypeNormal, "Stopped", "Stop", "The VirtualMachineInstance was shut down.")
	case v1.Failed:
		reason, msg := "Failed", "The VirtualMachineInstance failed."
		for _, c := range st.Conditions {
			if c.Type == v1.VirtualMachineInstanceReady && c.Reason != "" {
				reason, msg = c.Reason, c.Message
			}
		}
		h.Recorder.Eventf(vmi, nil, corev1.EventTypeWarning, reason, "Stop", "%s", msg)
	}
}

func ignoreProbeTimes(st v1.VirtualMachineInstanceStatus) v1.VirtualMachineInstanceStatus {
	st = *st.DeepCopy()
	for i := range st.Conditions {
		st.Conditions[i].LastProbeTime = metav1.Time{}
	}
	return st
}

// release frees a finished VMI's node resources; its directory (with the
// serial console log) stays until the VMI is deleted.
func (h *Handler) release(ctx context.Context, vmi *v1.VirtualMachineInstance, d vmDir) error {
	state, _, _ := d.state()
	if state == Running {
		if err := d.stop(ctx, 0); err != nil {
			return err
		}
	}
	// A launcher Pod still waiting for the spec of a VMI that failed
	// before it was prepared ends, instead of holding its node's memory.
	if state == NotStarted && d.pod.ready() == nil {
		if err := d.pod.vm.WriteFile(launcher.CancelFile, nil); err != nil {
			return err
		}
	}
	// The kubelet cannot remove the Pod's volumes while images are mounted there.
	return d.unmountPodMounts()
}

// teardown stops the VM within its grace period, removes its files and
// lets the deletion finish.
func (h *Handler) teardown(ctx context.Context, vmi *v1.VirtualMachineInstance, d vmDir) error {
	if !controllerutil.ContainsFinalizer(vmi, Finalizer) {
		return nil
	}
	grace := 180 * time.Second
	if g := vmi.Spec.TerminationGracePeriodSeconds; g != nil {
		grace = time.Duration(*g) * time.Second
	}
	if state, _, _ := d.state(); state == Running && h.Recorder != nil {
		h.Recorder.Eventf(vmi, nil, corev1.EventTypeNormal, "ShuttingDown", "Stop", "Signaled Graceful Shutdown")
	}
	if err := d.stop(ctx, grace); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "stopping the launcher", "vmi", klog.KObj(vmi))
	}
	if err := d.remove(); err != nil {
		return err
	}
	base := vmi.DeepCopy()
	controllerutil.RemoveFinalizer(vmi, Finalizer)
	if err := h.Client.Patch(ctx, vmi, client.MergeFrom(base)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removing the finalizer of %s: %w", klog.KObj(vmi), err)
	}
	ctrl.LoggerFrom(ctx).Info("VM removed from the node", "vmi", klog.KObj(vmi))
	return nil
}

// SetupWithManager registers the reconciler, the collector, the device
// plugin of /dev/net/tun and, when exec is set, the exec server. The manager's cache should hold only the
// VMIs labelled with this node (see CacheOptions).
func (h *Handler) SetupWithManager(mgr ctrl.Manager, exec *ExecServer) error {
	h.wake = make(chan event.TypedGenericEvent[*v1.VirtualMachineInstance], 16)
	err := ctrl.NewControllerManagedBy(mgr).Named("vmi-handler").
		For(&v1.VirtualMachineInstance{}).
		WatchesRawSource(source.Channel(h.wake, &crhandler.TypedEnqueueRequestForObject[*v1.VirtualMachineInstance]{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: 4}).
		Complete(h)
	if err != nil {
		return err
	}
	if err := mgr.Add(Collector{h}); err != nil {
		return err
	}
	tun := h.tunPlugin()
	err = mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		return tun.Start(logr.NewContext(ctx, mgr.GetLogger()))
	}))
	if err != nil {
		return err
	}
	if exec != nil {
		return mgr.Add(*exec)
	}
	return nil
}

// CacheOptions limit the VMIs the handler watches to those placed on node.
func CacheOptions(node string) cache.Options {
	return cache.Options{ByObject: map[client.Object]cache.ByObject{
		&v1.VirtualMachineInstance{}: {Label: labels.SelectorFromSet(labels.Set{v1.NodeNameLabel: node})},
	}}
}
