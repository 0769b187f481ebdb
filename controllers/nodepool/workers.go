package nodepool

import (
	"context"
	"fmt"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tekvirt/tekvirt/controllers/hostpath"
)

// converge caches the boot image, adds the workers missing and removes
// (drain, then delete) those too many.
func (r *Reconciler) converge(ctx context.Context, np *hyperv1.NodePool, obs *Observed, e env, vms []kubevirtv1.VirtualMachine, first string) error {
	spec, hosted := e.spec, e.hosted
	if UsesCache(np) {
		var err error
		if spec.Cache, err = r.cache(ctx, np, obs, spec); err != nil {
			return err
		}
	}
	// Workers on a drained infrastructure node are replaced (drained in
	// the hosted cluster, deleted), as HyperShift's evictionStrategy
	// External flow does; the autoscaler's choice goes too.
	for _, name := range append(Evacuating(obs.Machines), first) {
		if name == "" {
			continue
		}
		if err := r.markRemoving(ctx, spec.Namespace, name, obs); err != nil {
			return err
		}
	}
	add, remove := Plan(obs.Desired, obs.Machines)
	if obs.CacheMessage != "" {
		add = 0
	}
	log := ctrl.LoggerFrom(ctx)
	for range add {
		name := workerName(np)
		if err := r.Create(ctx, VirtualMachine(np, name, spec)); err != nil {
			return fmt.Errorf("creating worker VirtualMachine %s/%s: %w", spec.Namespace, name, err)
		}
		log.Info("worker added", "virtualMachine", name, "namespace", spec.Namespace)
		obs.Machines = append(obs.Machines, Machine{Name: name})
	}
	for _, name := range remove {
		if err := r.markRemoving(ctx, spec.Namespace, name, obs); err != nil {
			return err
		}
	}
	for i := range vms {
		vm := &vms[i]
		if vm.Annotations[RemovingAnnotation] == "" || !vm.DeletionTimestamp.IsZero() {
			continue
		}
		if err := r.remove(ctx, hosted, vm); err != nil {
			return err
		}
	}
	return nil
}

// cache makes sure of the pool's boot-image cache, notes it in obs, and
// returns what new root volumes are cloned from: the cache, or "" (the
// image imported) while the cache sits on a cordoned node, since a clone
// runs where its node-local source is.
func (r *Reconciler) cache(ctx context.Context, np *hyperv1.NodePool, obs *Observed, spec Spec) (string, error) {
	msg, err := r.ensureCache(ctx, np, spec)
	if err != nil {
		return "", err
	}
	obs.Cache, obs.CacheMessage = CacheName(np, spec.Image), msg
	if msg != "" {
		return obs.Cache, nil
	}
	node, err := r.cacheNodeUnschedulable(ctx, spec.Namespace, obs.Cache)
	if err != nil || node == "" {
		return obs.Cache, err
	}
	ctrl.LoggerFrom(ctx).Info("boot image cache on an unschedulable node; new workers import the image", "cache", obs.Cache, "node", node)
	return "", nil
}

// cacheNodeUnschedulable is the node the cache's volume is bound to when
// that volume is node-local and the node is cordoned, else "".
func (r *Reconciler) cacheNodeUnschedulable(ctx context.Context, ns, cache string) (string, error) {
	pvc := &corev1.PersistentVolumeClaim{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: ns, Name: cache}, pvc); err != nil || pvc.Spec.VolumeName == "" {
		return "", client.IgnoreNotFound(err)
	}
	pv := &corev1.PersistentVolume{}
	if err := r.Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, pv); err != nil {
		return "", client.IgnoreNotFound(err)
	}
	name := hostpath.VolumeNode(pv)
	if name == "" {
		return "", nil
	}
	node := &corev1.Node{}
	if err := r.Reader.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
		return "", client.IgnoreNotFound(err)
	}
	if node.Spec.Unschedulable {
		return name, nil
	}
	return "", nil
}

// markRemoving marks worker name to be drained and removed.
func (r *Reconciler) markRemoving(ctx context.Context, ns, name string, obs *Observed) error {
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:"true"}}}`, RemovingAnnotation)
	vm := &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := r.Patch(ctx, vm, client.RawPatch(types.MergePatchType, patch)); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("marking worker %s/%s for removal: %w", ns, name, err)
	}
	ctrl.LoggerFrom(ctx).Info("worker to remove", "virtualMachine", name, "namespace", ns)
	for i := range obs.Machines {
		if obs.Machines[i].Name == name {
			obs.Machines[i].Removing = true
		}
	}
	return nil
}

// workerName is a new worker's name: the pool's and a random suffix, as
// HyperShift names machines. It is the hosted node's name too.
func workerName(np *hyperv1.NodePool) string {
	base := np.Name
	if len(base) > 40 {
		base = base[:40]
	}
	return base + "-" + utilrand.String(5)
}

// remove drains a worker's hosted node, then deletes its VM (its root
// volume goes with it) and the Node object.
func (r *Reconciler) remove(ctx context.Context, hosted kubernetes.Interface, vm *kubevirtv1.VirtualMachine) error {
	done, msg, err := drain(ctx, hosted, vm.Name)
	if err != nil {
		return err
	}
	log := ctrl.LoggerFrom(ctx)
	if !done {
		log.Info("draining", "node", vm.Name, "status", msg)
		return nil
	}
	if err := r.Delete(ctx, vm); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting worker VirtualMachine %s/%s: %w", vm.Namespace, vm.Name, err)
	}
	if err := hosted.CoreV1().Nodes().Delete(ctx, vm.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting hosted node %s: %w", vm.Name, err)
	}
	log.Info("worker removed", "virtualMachine", vm.Name, "namespace", vm.Namespace)
	return nil
}

// ensureCache creates the pool's boot-image cache DataVolume unless it
// exists; it returns how the import is doing until it has succeeded.
func (r *Reconciler) ensureCache(ctx context.Context, np *hyperv1.NodePool, spec Spec) (string, error) {
	want := CacheDataVolume(np, spec.Namespace, spec.Image)
	dv := &cdiv1.DataVolume{}
	err := r.Get(ctx, client.ObjectKeyFromObject(want), dv)
	if apierrors.IsNotFound(err) {
		if err := r.Create(ctx, want); err != nil {
			return "", fmt.Errorf("creating the boot image cache DataVolume %s/%s: %w", want.Namespace, want.Name, err)
		}
		return "importing " + spec.Image, nil
	}
	if err != nil {
		return "", err
	}
	return CacheProgress(dv), nil
}
