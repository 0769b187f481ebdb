package claimimport

import (
	"context"
	"fmt"

	pipelinev1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/tekvirt/tekvirt/catalog"
	"github.com/tekvirt/tekvirt/controllers/datavolume"
)

// ClaimLabel marks the import run of a claim.
const ClaimLabel = "cdi.kubevirt.io/storage.import.claim"

// Reconciler imports into claims annotated with AnnEndpoint.
type Reconciler struct {
	Client client.Client
	// StepImage runs the import-disk step (as in the installed catalog).
	StepImage string
}

// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=tekton.dev,resources=taskruns,verbs=get;list;watch;create

// Reconcile starts the claim's import once and mirrors its run into the
// claim's annotations.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pvc := &corev1.PersistentVolumeClaim{}
	if err := r.Client.Get(ctx, req.NamespacedName, pvc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !wanted(pvc) || pvc.DeletionTimestamp != nil || pvc.Annotations[AnnPodPhase] == string(corev1.PodSucceeded) {
		return ctrl.Result{}, nil
	}
	dv, invalid := DataVolume(pvc)
	var run *pipelinev1.TaskRun
	if invalid == nil {
		var err error
		if run, err = r.ensureRun(ctx, pvc, dv); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{}, r.annotate(ctx, pvc, Annotations(run, invalid))
}

// RunName names the import run of a claim, as CDI names its importer Pod.
func RunName(pvc string) string {
	name := "importer-" + pvc
	if len(name) > 63 {
		name = name[:63]
	}
	return name
}

func (r *Reconciler) ensureRun(ctx context.Context, pvc *corev1.PersistentVolumeClaim, dv *cdiv1.DataVolume) (*pipelinev1.TaskRun, error) {
	run := &pipelinev1.TaskRun{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: pvc.Namespace, Name: RunName(pvc.Name)}, run)
	if err == nil || !apierrors.IsNotFound(err) {
		return run, err
	}
	task, err := catalog.InlineTask("import-disk", r.StepImage)
	if err != nil {
		return nil, err
	}
	run = datavolume.ImportRun(dv, pvc, task, 0, "")
	run.Name = RunName(pvc.Name)
	run.Labels = map[string]string{ClaimLabel: pvc.Name, "app.kubernetes.io/part-of": "tekvirt"}
	if err := controllerutil.SetControllerReference(pvc, run, r.Client.Scheme()); err != nil {
		return nil, err
	}
	if err := r.Client.Create(ctx, run); err != nil {
		return nil, fmt.Errorf("creating the import TaskRun of PVC %s: %w", klog.KObj(pvc), err)
	}
	ctrl.LoggerFrom(ctx).Info("import started", "pvc", klog.KObj(pvc), "taskRun", run.Name)
	return run, nil
}

// annotate writes want into the claim's annotations when they differ.
func (r *Reconciler) annotate(ctx context.Context, pvc *corev1.PersistentVolumeClaim, want map[string]string) error {
	base := pvc.DeepCopy()
	changed := false
	for k, v := range want {
		if pvc.Annotations[k] != v {
			pvc.Annotations[k], changed = v, true
		}
	}
	if !changed {
		return nil
	}
	if err := r.Client.Patch(ctx, pvc, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("annotating PVC %s: %w", klog.KObj(pvc), err)
	}
	return nil
}

// wanted says whether the claim asks for an import.
func wanted(o client.Object) bool {
	a := o.GetAnnotations()
	return a[AnnEndpoint] != "" || a[AnnSource] == SourceNone
}

// SetupWithManager watches the claims that ask for an import and their runs.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("claim-import").
		For(&corev1.PersistentVolumeClaim{}, builder.WithPredicates(predicate.NewPredicateFuncs(wanted))).
		Owns(&pipelinev1.TaskRun{}).
		Complete(r)
}
