package datavolume

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	pipelinev1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/tekvirt/tekvirt/catalog"
	"github.com/tekvirt/tekvirt/contracts/upload"
	ctrlconfig "github.com/tekvirt/tekvirt/controllers/config"
)

// A clone across namespaces is CDI's host-assisted clone: the target
// namespace runs an upload step on the new claim, and a run in the source
// namespace (which alone may mount the source claim) sends the disk to it
// through the upload proxy, with a token for the target claim.

// Labels of a sending run, naming the DataVolume it clones for. The UID
// tells a DataVolume's senders from those of an earlier one of the same
// name, whose token would be good for the new claim too.
const (
	CloneTargetNamespaceLabel = "cdi.kubevirt.io/cloneTargetNamespace"
	CloneTargetNameLabel      = "cdi.kubevirt.io/cloneTargetName"
	CloneTargetUIDLabel       = "tekvirt.io/clone-target-uid"
)

// sendTokenTTL is how long a sender's token is valid: it is made just
// before the sender's pod starts, which uses it at once.
const sendTokenTTL = 10 * time.Minute

// crossNamespace reports whether dv clones from another namespace.
func crossNamespace(dv *cdiv1.DataVolume) bool {
	src := dv.Spec.Source
	return src != nil && src.PVC != nil && src.PVC.Namespace != "" && src.PVC.Namespace != dv.Namespace
}

// Receives reports whether dv's run receives its disk as an upload: an
// upload, a clone from another namespace's claim or VolumeSnapshot (the
// stored DataVolume, which the upload proxy reads, names the snapshot).
func Receives(dv *cdiv1.DataVolume) bool {
	return dv.Spec.Source.Upload != nil || crossNamespace(dv) || crossNamespaceSnapshot(dv) != nil
}

// sendRunName names an attempt's sending run in the source namespace; the
// UID's start keeps it apart from the runs of an earlier DataVolume of the
// same name.
func sendRunName(dv *cdiv1.DataVolume, attempt int32) string {
	uid := string(dv.UID)
	suffix := fmt.Sprintf("-%s-send-%d", uid[:min(8, len(uid))], attempt)
	name := dv.Namespace + "-" + dv.Name
	return name[:min(len(name), 63-len(suffix))] + suffix
}

// syncSender starts the sending run once the target's upload step answers,
// and records a failed send as the DataVolume's failure.
func (r *Reconciler) syncSender(ctx context.Context, dv *cdiv1.DataVolume, obs *observed) error {
	run, err := r.sender(ctx, dv)
	if apierrors.IsNotFound(err) {
		if err := r.deleteSenders(ctx, dv.Namespace, dv.Name, dv.UID); err != nil {
			return err
		}
		if err := r.authorizeClone(ctx, dv, obs); err != nil {
			if denied(err) {
				obs.failed = err.Error()
				return r.cancel(ctx, obs.run)
			}
			return err
		}
		run, err = r.createSender(ctx, dv)
	}
	if err != nil {
		return err
	}
	if run.Spec.Status == pipelinev1.TaskRunSpecStatusPending {
		// Just created, or created by a reconcile that ended before
		// releasing it.
		if err := r.releaseSender(ctx, dv, run, obs.pvc); err != nil {
			return err
		}
	}
	if obs.failed = senderFailure(dv, run, StepError(run)); obs.failed != "" {
		return r.cancel(ctx, obs.run)
	}
	return nil
}

// sender is the current attempt's sending run.
func (r *Reconciler) sender(ctx context.Context, dv *cdiv1.DataVolume) (*pipelinev1.TaskRun, error) {
	run := &pipelinev1.TaskRun{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: dv.Spec.Source.PVC.Namespace, Name: sendRunName(dv, dv.Status.RestartCount)}, run)
	return run, err
}

// sendFailure is why a clone across namespaces failed when its sender did
// (the upload step was then cancelled), or "".
func (r *Reconciler) sendFailure(ctx context.Context, dv *cdiv1.DataVolume) string {
	if !crossNamespace(dv) {
		return ""
	}
	sender, err := r.sender(ctx, dv)
	if err != nil {
		return ""
	}
	return senderFailure(dv, sender, StepError(sender))
}

// senderFailure is the failure to report for a failed sending run (cause
// is its error, when known), or "". Sends are not retried: the sender
// retries what a retry can fix itself.
func senderFailure(dv *cdiv1.DataVolume, run *pipelinev1.TaskRun, cause string) string {
	done, ok, msg := runState(run)
	if !done || ok {
		return ""
	}
	if cause != "" {
		msg = cause
	}
	src := dv.Spec.Source.PVC
	return fmt.Sprintf("sending PVC %s/%s failed: %s (TaskRun %s/%s)", src.Namespace, src.Name, msg, run.Namespace, run.Name)
}

// createSender creates the sending run in the source namespace, pending:
// releaseSender starts it once its token is in place.
func (r *Reconciler) createSender(ctx context.Context, dv *cdiv1.DataVolume) (*pipelinev1.TaskRun, error) {
	url, serverName, err := r.uploadProxy(ctx)
	if err != nil {
		return nil, err
	}
	task, err := catalog.InlineTask("clone-disk", r.StepImage)
	if err != nil {
		return nil, err
	}
	run := sendRun(dv, task, url, serverName)
	err = r.Client.Create(ctx, run)
	if apierrors.IsAlreadyExists(err) {
		err = r.Reader.Get(ctx, client.ObjectKeyFromObject(run), run)
	}
	if err != nil {
		return nil, fmt.Errorf("creating TaskRun %s: %w", klog.KObj(run), err)
	}
	return run, nil
}

// releaseSender gives a pending sending run its token and starts it. The
// token lives in a Secret owned by the run, not in the run's spec, which
// anyone who may read runs in the source namespace could read.
func (r *Reconciler) releaseSender(ctx context.Context, dv *cdiv1.DataVolume, run *pipelinev1.TaskRun, target *corev1.PersistentVolumeClaim) error {
	now := time.Now()
	token := upload.Sign(r.UploadKey, upload.Claims{Operation: upload.Operation,
		Namespace: target.Namespace, PVC: target.Name, UID: string(target.UID), IssuedAt: now.Unix(), Expires: now.Add(sendTokenTTL).Unix()})
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: run.Namespace, Name: run.Name, Labels: run.Labels},
		StringData: map[string]string{sendTokenKey: token}}
	if err := controllerutil.SetControllerReference(run, secret, r.Client.Scheme()); err != nil {
		return err
	}
	if err := r.Client.Create(ctx, secret); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the token Secret %s: %w", klog.KObj(secret), err)
	}
	base := run.DeepCopy()
	run.Spec.Status = ""
	if err := r.Client.Patch(ctx, run, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("starting TaskRun %s: %w", klog.KObj(run), err)
	}
	ctrl.LoggerFrom(ctx).Info("clone sender started", "dataVolume", klog.KObj(dv), "taskRun", klog.KObj(run))
	return nil
}

// Senders' token Secrets are only ever created, never read back.
// +kubebuilder:rbac:groups="",resources=secrets,verbs=create

// sendTokenKey is the key of the token in a sender's Secret.
const sendTokenKey = "token"

// sendRun is the catalog's clone-disk task, inline, in send mode: only the
// source workspace, posting its disk to the upload proxy with the token of
// the Secret named as the run. It is created pending.
func sendRun(dv *cdiv1.DataVolume, task *pipelinev1.Task, url, serverName string) *pipelinev1.TaskRun {
	src := dv.Spec.Source.PVC
	spec := task.Spec.DeepCopy()
	spec.Params = nil
	spec.Workspaces = []pipelinev1.WorkspaceDeclaration{{Name: "source", ReadOnly: true}}
	step := &spec.Steps[0]
	step.Args = []string{"--source-dir=$(workspaces.source.path)", "--send-url=" + url, "--send-server-name=" + serverName}
	name := sendRunName(dv, dv.Status.RestartCount)
	step.Env = append(step.Env, corev1.EnvVar{Name: upload.TokenEnv, ValueFrom: &corev1.EnvVarSource{
		SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: sendTokenKey}}})
	return &pipelinev1.TaskRun{
		ObjectMeta: metav1.ObjectMeta{Namespace: src.Namespace, Name: name,
			Labels: map[string]string{CloneTargetNamespaceLabel: dv.Namespace, CloneTargetNameLabel: dv.Name,
				CloneTargetUIDLabel: string(dv.UID), "app.kubernetes.io/part-of": "tekvirt"}},
		Spec: pipelinev1.TaskRunSpec{
			Status:   pipelinev1.TaskRunSpecStatusPending,
			TaskSpec: spec,
			Workspaces: []pipelinev1.WorkspaceBinding{{Name: "source",
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: src.Name, ReadOnly: true}}},
		},
	}
}

// uploadProxy is the proxy's upload URL (its Service's cluster IP; pods
// may have no cluster DNS) and the name its certificate is for.
func (r *Reconciler) uploadProxy(ctx context.Context) (string, string, error) {
	svc := &corev1.Service{}
	key := client.ObjectKey{Namespace: ctrlconfig.Namespace, Name: ctrlconfig.UploadProxyService}
	if err := r.Reader.Get(ctx, key, svc); err != nil {
		return "", "", fmt.Errorf("finding the upload proxy %s: %w", key, err)
	}
	if len(svc.Spec.Ports) == 0 || svc.Spec.ClusterIP == "" {
		return "", "", fmt.Errorf("the upload proxy Service %s has no cluster IP and port", key)
	}
	host := net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(int(svc.Spec.Ports[0].Port)))
	return "https://" + host + upload.Path, key.Name + "." + key.Namespace + ".svc", nil
}

// cancel stops a run (the target's upload step, when its sender failed).
func (r *Reconciler) cancel(ctx context.Context, run *pipelinev1.TaskRun) error {
	if run == nil || run.Spec.Status == pipelinev1.TaskRunSpecStatusCancelled {
		return nil
	}
	base := run.DeepCopy()
	run.Spec.Status = pipelinev1.TaskRunSpecStatusCancelled
	if err := r.Client.Patch(ctx, run, client.MergeFrom(base)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("cancelling TaskRun %s: %w", klog.KObj(run), err)
	}
	return nil
}

// deleteSenders removes the sending runs for the DataVolume namespace/name,
// in whatever namespace they run, but those of the DataVolume with UID keep
// (none when keep is empty). They live in other namespaces than their
// DataVolume, so no owner reference removes them.
func (r *Reconciler) deleteSenders(ctx context.Context, namespace, name string, keep types.UID) error {
	runs := &pipelinev1.TaskRunList{}
	if err := r.Client.List(ctx, runs, client.MatchingLabels{CloneTargetNamespaceLabel: namespace, CloneTargetNameLabel: name}); err != nil {
		return fmt.Errorf("listing the clone senders of %s/%s: %w", namespace, name, err)
	}
	for i := range runs.Items {
		run := &runs.Items[i]
		if keep != "" && run.Labels[CloneTargetUIDLabel] == string(keep) {
			continue
		}
		err := r.Client.Delete(ctx, run, client.PropagationPolicy(metav1.DeletePropagationBackground))
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting clone sender %s of %s/%s: %w", klog.KObj(run), namespace, name, err)
		}
		ctrl.LoggerFrom(ctx).Info("clone sender deleted", "dataVolume", klog.KRef(namespace, name), "taskRun", klog.KObj(run))
	}
	return r.deleteTransfers(ctx, namespace, name, keep)
}
