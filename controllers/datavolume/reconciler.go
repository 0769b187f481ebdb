package datavolume

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	pipelinev1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/tekvirt/tekvirt/catalog"
	"github.com/tekvirt/tekvirt/contracts/datastep"
	"github.com/tekvirt/tekvirt/controllers/conditions"
	"github.com/tekvirt/tekvirt/controllers/hostpath"
)

// MaxRestarts is how often a failed import that a retry may fix is rerun.
const MaxRestarts = 3

// Reconciler imports DataVolumes with the catalog's import-disk task.
type Reconciler struct {
	Client client.Client
	// Reader reads objects the manager does not cache (the import's pod).
	Reader client.Reader
	// StepImage runs the task's step (as in the installed catalog).
	StepImage string
	// UploadKey signs the tokens of clone senders; its public half, given
	// to upload runs, verifies all upload tokens.
	UploadKey ed25519.PrivateKey
	// Recorder records the DataVolume's events, as CDI's controller does
	// (scheduled, in progress, succeeded, failed and why).
	Recorder events.EventRecorder
}

// +kubebuilder:rbac:groups=cdi.kubevirt.io,resources=datavolumes,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=cdi.kubevirt.io,resources=datavolumes/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get;list;watch;create
// +kubebuilder:rbac:groups="",resources=persistentvolumes,verbs=get;list;watch
// +kubebuilder:rbac:groups=storage.k8s.io,resources=storageclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups=tekton.dev,resources=taskruns,verbs=get;list;watch;create;delete;deletecollection;patch
// +kubebuilder:rbac:groups="",resources=services,verbs=get
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
// +kubebuilder:rbac:groups="",resources=pods,verbs=get

// Reconcile moves one DataVolume along and reports it.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	dv := &cdiv1.DataVolume{}
	if err := r.Client.Get(ctx, req.NamespacedName, dv); err != nil {
		if apierrors.IsNotFound(err) {
			// Owner references remove the claim and the runs in its
			// namespace; a clone's senders in the source namespace go here.
			return ctrl.Result{}, r.deleteSenders(ctx, req.Namespace, req.Name, "")
		}
		return ctrl.Result{}, err
	}
	if dv.DeletionTimestamp != nil {
		return ctrl.Result{}, r.deleteSenders(ctx, dv.Namespace, dv.Name, "")
	}
	base := dv.DeepCopy()
	var obs observed
	defer func() { reterr = r.report(ctx, dv, base, &obs, reterr) }()
	if obs.invalid = Supported(dv); obs.invalid != nil {
		return ctrl.Result{}, nil
	}
	if dv.Status.Phase == cdiv1.Succeeded {
		// Done for good, whatever became of the source since.
		var err error
		if obs.pvc, err = r.claim(ctx, dv, &obs); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{}, r.deleteTransfers(ctx, dv.Namespace, dv.Name, "")
	}
	if res, done, err := r.source(ctx, dv, &obs); done {
		return res, err
	}
	pvc, err := r.claim(ctx, dv, &obs)
	if pvc == nil {
		return withoutClaim(&obs, err)
	}
	obs.pvc, obs.clone, obs.upload = pvc, copiesAClaim(dv.Spec.Source), dv.Spec.Source.Upload != nil
	if dv.Spec.Source.Snapshot != nil {
		// The CSI driver restores the claim from the snapshot; bound, it is done.
		obs.restored = pvc.Status.Phase == corev1.ClaimBound
		return ctrl.Result{}, nil
	}
	if pvc.Status.Phase != corev1.ClaimBound {
		if wait, err := r.waitsForConsumer(ctx, pvc); err != nil || !wait {
			return ctrl.Result{}, err
		}
		// The run's Pod is the claim's first consumer: the volume is made
		// on the node the scheduler picks for it.
	}
	return r.sync(ctx, dv, pvc, &obs)
}

// copiesAClaim reports whether src is another claim's content (a claim's,
// a VolumeSnapshot's): the DataVolume goes through the Clone phases.
func copiesAClaim(src *cdiv1.DataVolumeSource) bool {
	return src.PVC != nil || src.Snapshot != nil
}

// source replaces dv's source (in memory) by what it reads from: the
// source a DataSource reference names, the transfer claim of another
// namespace's VolumeSnapshot; done is set when dv must wait or cannot.
func (r *Reconciler) source(ctx context.Context, dv *cdiv1.DataVolume, obs *observed) (ctrl.Result, bool, error) {
	if res, done, err := r.resolve(ctx, dv, obs); done {
		return res, done, err
	}
	return r.transfer(ctx, dv, obs)
}

// resolve replaces a DataSource reference by the source it names, in
// memory only (the status patch carries no spec changes); done is set when
// the DataVolume must wait for it or cannot use it.
func (r *Reconciler) resolve(ctx context.Context, dv *cdiv1.DataVolume, obs *observed) (ctrl.Result, bool, error) {
	src, err := ResolveSource(ctx, r.Client, dv)
	switch {
	case errors.Is(err, ErrSourceNotReady):
		obs.waiting = err.Error()
		return ctrl.Result{RequeueAfter: sourceRefEvery}, true, nil
	case err != nil:
		return ctrl.Result{}, true, err
	}
	obs.dataSource = SourceRefKey(dv)
	dv.Spec.Source, dv.Spec.SourceRef = src, nil
	obs.invalid = Supported(dv)
	return ctrl.Result{}, obs.invalid != nil, nil
}

// sync runs the import (or clone, or upload) of a bound claim, retrying a
// failed run that a retry may fix.
func (r *Reconciler) sync(ctx context.Context, dv *cdiv1.DataVolume, pvc *corev1.PersistentVolumeClaim, obs *observed) (ctrl.Result, error) {
	if err := r.startRun(ctx, dv, pvc, obs); err != nil || obs.failed != "" {
		return ctrl.Result{}, err
	}
	if obs.run == nil { // a clone whose source is still being populated
		return ctrl.Result{RequeueAfter: progressEvery}, nil
	}
	done, ok, msg := runState(obs.run)
	if !done {
		obs.progress = r.progress(ctx, obs.run)
		if crossNamespace(dv) && obs.progress != "" {
			if err := r.syncSender(ctx, dv, obs); err != nil {
				return ctrl.Result{}, err
			}
		}
		return ctrl.Result{RequeueAfter: progressEvery}, nil
	}
	if ok {
		return ctrl.Result{}, r.succeeded(ctx, dv)
	}
	if msg := conditions.ReadyMessage(dv); dv.Status.Phase == cdiv1.Failed && msg != "" {
		// Failed for good before: keep the cause rather than read the logs again.
		obs.failed = msg
		return ctrl.Result{}, nil
	}
	if obs.failed = r.sendFailure(ctx, dv); obs.failed != "" {
		return ctrl.Result{}, nil
	}
	if cause := StepError(obs.run); cause != "" {
		msg = cause
	}
	if permanent(obs.run) || dv.Status.RestartCount >= MaxRestarts {
		obs.failed = fmt.Sprintf("import failed: %s (TaskRun %s)", msg, obs.run.Name)
		return ctrl.Result{}, nil
	}
	dv.Status.RestartCount++
	ctrl.LoggerFrom(ctx).Info("retrying the import", "dataVolume", klog.KObj(dv), "restartCount", dv.Status.RestartCount, "reason", msg)
	return ctrl.Result{}, r.startRun(ctx, dv, pvc, obs)
}

// startRun sets obs.run to the current attempt's run, started if need be;
// a clone its requester may not make fails the DataVolume instead.
func (r *Reconciler) startRun(ctx context.Context, dv *cdiv1.DataVolume, pvc *corev1.PersistentVolumeClaim, obs *observed) error {
	var err error
	obs.run, err = r.ensureRun(ctx, dv, pvc, obs)
	if denied(err) {
		obs.failed = err.Error()
		return nil
	}
	return err
}

// succeeded cleans up after a DataVolume that is done: the senders of a
// clone across namespaces (failed ones stay, for their logs).
func (r *Reconciler) succeeded(ctx context.Context, dv *cdiv1.DataVolume) error {
	if !crossNamespace(dv) {
		return nil
	}
	return r.deleteSenders(ctx, dv.Namespace, dv.Name, "")
}

// sourcePending says why a clone's source claim is not ready to be read:
// its DataVolume has not Succeeded yet (CDI's IsPopulated); "" when it
// is, when no DataVolume owns it, or when it does not exist (the run then
// fails naming it).
func (r *Reconciler) sourcePending(ctx context.Context, dv *cdiv1.DataVolume) (string, error) {
	src := dv.Spec.Source.PVC
	pvc := &corev1.PersistentVolumeClaim{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: src.Namespace, Name: src.Name}, pvc); err != nil {
		return "", client.IgnoreNotFound(err)
	}
	var owner *cdiv1.DataVolume
	populated, err := cdiv1.IsPopulated(pvc, func(name, ns string) (*cdiv1.DataVolume, error) {
		owner = &cdiv1.DataVolume{}
		return owner, r.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, owner)
	})
	if err != nil || populated {
		return "", client.IgnoreNotFound(err)
	}
	return fmt.Sprintf("waiting for the source PersistentVolumeClaim %s/%s: its DataVolume is %s", src.Namespace, src.Name, owner.Status.Phase), nil
}

// sourceRefEvery is how often a DataVolume waiting for its DataSource looks again.
const sourceRefEvery = 5 * time.Second

// progressEvery is how often a running import's progress is read.
const progressEvery = 2 * time.Second

// progress asks the running import's step for its progress, as CDI reads
// its importer's; "" when it cannot tell yet.
func (r *Reconciler) progress(ctx context.Context, run *pipelinev1.TaskRun) string {
	if run.Status.PodName == "" || r.Reader == nil {
		return ""
	}
	pod := &corev1.Pod{}
	if err := r.Reader.Get(ctx, client.ObjectKey{Namespace: run.Namespace, Name: run.Status.PodName}, pod); err != nil || pod.Status.PodIP == "" {
		return ""
	}
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(cctx, http.MethodGet, fmt.Sprintf("http://%s/progress", net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(datastep.ProgressPort))), nil)
	if err != nil {
		return ""
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var rep datastep.ProgressReport
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&rep) != nil {
		return ""
	}
	return rep.Progress
}

// report patches dv's status from what the pass observed, unless it ended
// in the API server's passing trouble (retried with the status as it was).
func (r *Reconciler) report(ctx context.Context, dv, base *cdiv1.DataVolume, obs *observed, reterr error) error {
	if transient(reterr) {
		return reterr
	}
	dv.Status = nextStatus(dv, *obs, metav1.Now())
	if err := r.Client.Status().Patch(ctx, dv, client.MergeFrom(base)); err != nil {
		if !apierrors.IsNotFound(err) {
			reterr = errors.Join(reterr, fmt.Errorf("patching status of %s: %w", klog.KObj(dv), err))
		}
		return reterr
	}
	r.statusEvents(dv, base.Status)
	return errors.Join(reterr, r.annotateClaim(ctx, obs.pvc, dv.Status))
}

// withoutClaim ends a pass that has no claim: refused (obs.invalid),
// passing trouble (err), or a clone whose source has no volume yet.
func withoutClaim(obs *observed, err error) (ctrl.Result, error) {
	if err != nil || obs.invalid != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: progressEvery}, nil
}

// claim is ensureClaim with its lasting refusals recorded in obs.invalid
// (the DataVolume Failed, saying why); only passing trouble is returned.
func (r *Reconciler) claim(ctx context.Context, dv *cdiv1.DataVolume, obs *observed) (*corev1.PersistentVolumeClaim, error) {
	pvc, err := r.ensureClaim(ctx, dv, obs)
	if transient(err) {
		return nil, err
	}
	obs.invalid = err
	return pvc, nil
}

// ensureClaim returns the DataVolume's claim, created if need be; nil
// when a same-namespace clone must wait for its source's volume (placeClone).
func (r *Reconciler) ensureClaim(ctx context.Context, dv *cdiv1.DataVolume, obs *observed) (*corev1.PersistentVolumeClaim, error) {
	pvc := &corev1.PersistentVolumeClaim{}
	err := r.Client.Get(ctx, client.ObjectKeyFromObject(dv), pvc)
	if err == nil {
		if !metav1.IsControlledBy(pvc, dv) {
			return nil, fmt.Errorf("PVC %s exists and does not belong to this DataVolume", dv.Name)
		}
		return pvc, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, err
	}
	class, err := r.storageClass(ctx, dv)
	if err != nil {
		return nil, err
	}
	if pvc, err = claimFor(dv, class); err != nil {
		return nil, err
	}
	if obs.sourcePending, err = r.placeClone(ctx, dv, pvc); err != nil || obs.sourcePending != "" {
		obs.clone = obs.sourcePending != ""
		return nil, err
	}
	if err := controllerutil.SetControllerReference(dv, pvc, r.Client.Scheme()); err != nil {
		return nil, err
	}
	err = r.Client.Create(ctx, pvc)
	if apierrors.IsAlreadyExists(err) && r.Reader != nil {
		// Created by an earlier pass the cache has not seen yet.
		if err := r.Reader.Get(ctx, client.ObjectKeyFromObject(dv), pvc); err != nil {
			return nil, fmt.Errorf("reading PVC %s: %w", klog.KObj(pvc), err)
		}
		if !metav1.IsControlledBy(pvc, dv) {
			return nil, fmt.Errorf("PVC %s exists and does not belong to this DataVolume", dv.Name)
		}
		return pvc, nil
	}
	if err != nil {
		return nil, fmt.Errorf("creating PVC %s: %w", klog.KObj(pvc), err)
	}
	return pvc, nil
}

// transient reports whether err is the API server's passing trouble (or a
// claim the cache has not caught up with), retried rather than shown as the
// DataVolume's failure.
func transient(err error) bool {
	if err == nil {
		return false
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return false
	}
	return apierrors.IsAlreadyExists(err) || apierrors.IsConflict(err) || apierrors.IsServerTimeout(err) ||
		apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) || apierrors.IsServiceUnavailable(err) ||
		apierrors.IsInternalError(err) || apierrors.IsUnexpectedServerError(err)
}

// storageClass is the class dv's claim will have (hostpath.ClaimClass);
// nil when dv uses spec.pvc (its claim's spec is taken as written).
func (r *Reconciler) storageClass(ctx context.Context, dv *cdiv1.DataVolume) (*storagev1.StorageClass, error) {
	if dv.Spec.Storage == nil {
		return nil, nil
	}
	return hostpath.ClaimClass(ctx, r.Client, dv.Spec.Storage.StorageClassName)
}

// waitsForConsumer reports whether pvc's class binds a claim only once a
// Pod uses it (WaitForFirstConsumer).
func (r *Reconciler) waitsForConsumer(ctx context.Context, pvc *corev1.PersistentVolumeClaim) (bool, error) {
	if pvc.Spec.StorageClassName == nil || *pvc.Spec.StorageClassName == "" {
		return false, nil
	}
	class := &storagev1.StorageClass{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: *pvc.Spec.StorageClassName}, class); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return class.VolumeBindingMode != nil && *class.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer, nil
}

// placeClone asks for a same-namespace clone's volume on the node of its
// source's, since one Pod mounts both: node-local volumes elsewhere could
// never meet. While the source claim exists without a volume (made in the
// same breath as the clone, say), it says what the clone waits for and
// the claim is not made yet; a source that does not exist leaves the
// choice to the provisioner (the run then fails naming it).
func (r *Reconciler) placeClone(ctx context.Context, dv *cdiv1.DataVolume, pvc *corev1.PersistentVolumeClaim) (string, error) {
	src := dv.Spec.Source
	if src == nil || src.PVC == nil || crossNamespace(dv) || pvc.Annotations[hostpath.AnnProvisionOnNode] != "" {
		return "", nil
	}
	claim := &corev1.PersistentVolumeClaim{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: dv.Namespace, Name: src.PVC.Name}, claim); err != nil {
		return "", client.IgnoreNotFound(err)
	}
	if claim.Spec.VolumeName == "" {
		return fmt.Sprintf("waiting for the source PersistentVolumeClaim %s/%s to get its volume", dv.Namespace, src.PVC.Name), nil
	}
	pv := &corev1.PersistentVolume{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: claim.Spec.VolumeName}, pv); err != nil {
		return "", client.IgnoreNotFound(err)
	}
	if node := hostpath.VolumeNode(pv); node != "" {
		if pvc.Annotations == nil {
			pvc.Annotations = map[string]string{}
		}
		pvc.Annotations[hostpath.AnnProvisionOnNode] = node
		pvc.Annotations[hostpath.AnnSelectedNode] = node
	}
	return "", nil
}

// ensureRun returns the run of the current attempt, creating it if needed.
func (r *Reconciler) ensureRun(ctx context.Context, dv *cdiv1.DataVolume, pvc *corev1.PersistentVolumeClaim, obs *observed) (*pipelinev1.TaskRun, error) {
	run := &pipelinev1.TaskRun{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: dv.Namespace, Name: RunName(dv, dv.Status.RestartCount)}, run)
	if err == nil || !apierrors.IsNotFound(err) {
		return run, err
	}
	if dv.Spec.Source.PVC != nil {
		// Before the upload step of a clone across namespaces too, so that a
		// refused clone starts nothing; the sender is checked again.
		if err := r.authorizeClone(ctx, dv, obs); err != nil {
			return nil, err
		}
		var err error
		if obs.sourcePending, err = r.sourcePending(ctx, dv); err != nil || obs.sourcePending != "" {
			return nil, err
		}
	}
	if src := dv.Spec.Source.PVC; src != nil && !crossNamespace(dv) {
		task, err := catalog.InlineTask("clone-disk", r.StepImage)
		if err != nil {
			return nil, err
		}
		run = cloneRun(dv, pvc, task, dv.Status.RestartCount)
	} else {
		task, err := catalog.InlineTask("import-disk", r.StepImage)
		if err != nil {
			return nil, err
		}
		run = ImportRun(dv, pvc, task, dv.Status.RestartCount, base64.StdEncoding.EncodeToString(r.UploadKey.Public().(ed25519.PublicKey)))
	}
	if err := controllerutil.SetControllerReference(dv, run, r.Client.Scheme()); err != nil {
		return nil, err
	}
	if err := r.Client.Create(ctx, run); err != nil {
		return nil, fmt.Errorf("creating TaskRun %s: %w", klog.KObj(run), err)
	}
	ctrl.LoggerFrom(ctx).Info("import started", "dataVolume", klog.KObj(dv), "taskRun", run.Name)
	return run, nil
}

// SetupWithManager watches DataVolumes and the claims and runs they own.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("datavolume").
		For(&cdiv1.DataVolume{}).
		Owns(&corev1.PersistentVolumeClaim{}).
		Owns(&pipelinev1.TaskRun{}).
		Complete(r)
}

// statusEvents records what changed from old to dv's status: its phase,
// and a refusal of its run's Pod.
func (r *Reconciler) statusEvents(dv *cdiv1.DataVolume, old cdiv1.DataVolumeStatus) {
	if r.Recorder == nil {
		return
	}
	for _, e := range []func() (event, bool){
		func() (event, bool) { return phaseEvent(dv, old.Phase, dv.Status) },
		func() (event, bool) { return refusedEvent(old, dv.Status) },
	} {
		if ev, ok := e(); ok {
			r.Recorder.Eventf(dv, nil, ev.kind, ev.reason, ev.reason, "%s", ev.message)
		}
	}
}
