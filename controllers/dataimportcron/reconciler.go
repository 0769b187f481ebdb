package dataimportcron

import (
	"context"
	"errors"
	"fmt"
	"time"

	pipelinev1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/tekvirt/tekvirt/catalog"
	"github.com/tekvirt/tekvirt/contracts/importcron"
)

// Reconciler keeps DataImportCrons' DataSources fresh.
type Reconciler struct {
	Client client.Client
	// StepImage runs the poll run's step (as in the installed catalog).
	StepImage string
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// +kubebuilder:rbac:groups=cdi.kubevirt.io,resources=dataimportcrons,verbs=get;list;watch
// +kubebuilder:rbac:groups=cdi.kubevirt.io,resources=dataimportcrons/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=cdi.kubevirt.io,resources=datavolumes,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=cdi.kubevirt.io,resources=datasources,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups=tekton.dev,resources=taskruns,verbs=get;list;watch;create;delete

// Reconcile polls, imports, publishes and collects for one cron.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	c := &cdiv1.DataImportCron{}
	if err := r.Client.Get(ctx, req.NamespacedName, c); err != nil || c.DeletionTimestamp != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	now := time.Now()
	if r.Now != nil {
		now = r.Now()
	}
	base := c.DeepCopy()
	var obs observed
	defer func() {
		c.Status = nextStatus(c, obs, metav1.NewTime(now))
		if err := r.Client.Status().Patch(ctx, c, client.MergeFrom(base)); err != nil && !apierrors.IsNotFound(err) {
			reterr = errors.Join(reterr, fmt.Errorf("patching status of %s: %w", klog.KObj(c), err))
		}
	}()
	if obs.invalid = Supported(c); obs.invalid != nil {
		return ctrl.Result{}, nil
	}
	isDue, next, err := due(c.Spec.Schedule, c.Status.LastExecutionTimestamp, now)
	if err != nil {
		obs.invalid = err
		return ctrl.Result{}, nil
	}
	if obs.polled, obs.pollErr, err = r.poll(ctx, c, isDue, now); err != nil {
		return ctrl.Result{}, err
	}
	imports, err := r.imports(ctx, c)
	if err != nil {
		return ctrl.Result{}, err
	}
	if len(imports) > 0 {
		obs.latest = &imports[0]
	}
	obs.ready = latestSucceeded(imports)
	inUse := ""
	if obs.ready != nil {
		if err := r.publish(ctx, c, obs.ready); err != nil {
			return ctrl.Result{}, err
		}
		inUse = obs.ready.Name
	}
	if err := r.collect(ctx, c, imports, inUse); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: max(time.Until(next), time.Second)}, nil
}

func findCond(st cdiv1.DataImportCronStatus, t cdiv1.DataImportCronConditionType) *cdiv1.DataImportCronCondition {
	for i := range st.Conditions {
		if st.Conditions[i].Type == t {
			return &st.Conditions[i]
		}
	}
	return nil
}

// lastPollErr is the last poll's error, kept until a poll says otherwise.
func lastPollErr(c *cdiv1.DataImportCron) error {
	if cond := findCond(c.Status, cdiv1.DataImportCronUpToDate); cond != nil && cond.Reason == "DigestError" {
		return errors.New(cond.Message)
	}
	return nil
}

// poll starts a poll run when due and, once it has finished, imports the
// digest it found (when new) and deletes it. polled is set when a poll
// finished; pollErr is why it found no digest (or the last poll's error
// while none finished); err is an API error to retry on.
func (r *Reconciler) poll(ctx context.Context, c *cdiv1.DataImportCron, isDue bool, now time.Time) (polled bool, pollErr, err error) {
	run := &pipelinev1.TaskRun{}
	switch err := r.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: pollRunName(c)}, run); {
	case apierrors.IsNotFound(err):
		if !isDue {
			return false, lastPollErr(c), nil
		}
		return false, lastPollErr(c), r.startPoll(ctx, c)
	case err != nil:
		return false, nil, fmt.Errorf("reading the poll run of %s: %w", klog.KObj(c), err)
	}
	digest, done, pollErr := pollOutcome(c, run)
	if !done {
		return false, lastPollErr(c), nil
	}
	if pollErr == nil {
		pollErr = r.importDigest(ctx, c, digest, now)
	}
	if err := r.Client.Delete(ctx, run, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
		return true, pollErr, fmt.Errorf("deleting the finished poll run %s: %w", klog.KObj(run), err)
	}
	return true, pollErr, nil
}

// startPoll creates the cron's poll run.
func (r *Reconciler) startPoll(ctx context.Context, c *cdiv1.DataImportCron) error {
	task, err := catalog.InlineTask("import-disk", r.StepImage)
	if err != nil {
		return err
	}
	run := pollRun(c, task)
	if err := controllerutil.SetControllerReference(c, run, r.Client.Scheme()); err != nil {
		return err
	}
	if err := r.Client.Create(ctx, run); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the poll run %s: %w", klog.KObj(run), err)
	}
	ctrl.LoggerFrom(ctx).Info("polling the image digest", "dataImportCron", klog.KObj(c), "taskRun", run.Name)
	return nil
}

// importDigest creates the import of digest, unless it exists.
func (r *Reconciler) importDigest(ctx context.Context, c *cdiv1.DataImportCron, digest string, now time.Time) error {
	dv, err := newImport(c, digest, now)
	if err != nil {
		return err
	}
	if c.Spec.RetentionPolicy != nil && *c.Spec.RetentionPolicy == cdiv1.DataImportCronRetainNone {
		if err := controllerutil.SetControllerReference(c, dv, r.Client.Scheme()); err != nil {
			return err
		}
	}
	switch err := r.Client.Create(ctx, dv); {
	case apierrors.IsAlreadyExists(err):
		return nil // this digest is imported (or importing) already
	case err != nil:
		return fmt.Errorf("creating DataVolume %s: %w", klog.KObj(dv), err)
	}
	ctrl.LoggerFrom(ctx).Info("new image digest: importing", "dataImportCron", klog.KObj(c), "digest", digest, "dataVolume", dv.Name)
	return nil
}

// imports are the cron's DataVolumes, newest first.
func (r *Reconciler) imports(ctx context.Context, c *cdiv1.DataImportCron) ([]cdiv1.DataVolume, error) {
	list := &cdiv1.DataVolumeList{}
	if err := r.Client.List(ctx, list, client.InNamespace(c.Namespace), client.MatchingLabels{CronLabel: c.Name}); err != nil {
		return nil, fmt.Errorf("listing the imports of %s: %w", klog.KObj(c), err)
	}
	importcron.NewestFirst(list.Items)
	return list.Items, nil
}

// publish points the managed DataSource at dv.
func (r *Reconciler) publish(ctx context.Context, c *cdiv1.DataImportCron, dv *cdiv1.DataVolume) error {
	ds := &cdiv1.DataSource{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: c.Spec.ManagedDataSource}}
	op, err := controllerutil.CreateOrPatch(ctx, r.Client, ds, func() error {
		if ds.Labels == nil {
			ds.Labels = map[string]string{}
		}
		ds.Labels[CronLabel] = c.Name
		ds.Spec.Source = cdiv1.DataSourceSource{PVC: &cdiv1.DataVolumeSourcePVC{Namespace: dv.Namespace, Name: dv.Name}}
		return nil
	})
	if err != nil {
		return fmt.Errorf("updating DataSource %s: %w", klog.KObj(ds), err)
	}
	if op != controllerutil.OperationResultNone {
		ctrl.LoggerFrom(ctx).Info("DataSource updated", "dataSource", klog.KObj(ds), "dataVolume", dv.Name, "operation", op)
	}
	return nil
}

// collect deletes imports beyond importsToKeep, unless told never to.
func (r *Reconciler) collect(ctx context.Context, c *cdiv1.DataImportCron, imports []cdiv1.DataVolume, inUse string) error {
	if gc := c.Spec.GarbageCollect; gc != nil && *gc == cdiv1.DataImportCronGarbageCollectNever {
		return nil
	}
	keep := DefaultImportsToKeep
	if c.Spec.ImportsToKeep != nil {
		keep = max(int(*c.Spec.ImportsToKeep), 1)
	}
	for _, dv := range importcron.Outdated(imports, keep, inUse) {
		if err := r.Client.Delete(ctx, &dv); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting outdated import %s: %w", klog.KObj(&dv), err)
		}
		ctrl.LoggerFrom(ctx).Info("outdated import deleted", "dataImportCron", klog.KObj(c), "dataVolume", dv.Name)
	}
	return nil
}

// SetupWithManager watches crons, their imports and their poll runs.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	byLabel := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		if name := o.GetLabels()[CronLabel]; name != "" {
			return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: name}}}
		}
		return nil
	})
	return ctrl.NewControllerManagedBy(mgr).Named("dataimportcron").
		For(&cdiv1.DataImportCron{}).
		Watches(&cdiv1.DataVolume{}, byLabel).
		Owns(&pipelinev1.TaskRun{}).
		Complete(r)
}
