package cluster

import (
	"context"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// applier applies manifests with server-side apply, as `kubectl apply
// --server-side --force-conflicts` does; CRDs too large for client-side
// apply (Tekton's) go through the same path.
type applier struct {
	dyn    dynamic.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper
	// manager is the field manager (default "tekvirt").
	manager string
}

// asKubectl applies as `kubectl apply --server-side` does (field
// manager "kubectl"), so that a user re-applying the same files later is
// the same manager and changes nothing.
func (a *applier) asKubectl() *applier {
	c := *a
	c.manager = "kubectl"
	return &c
}

func newApplier(cfg *rest.Config) (*applier, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &applier{dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))}, nil
}

// apply server-side-applies objs in order. A kind whose CRD was applied a
// moment ago may not be served yet: the mapper is refreshed and the object
// retried for up to a minute.
func (a *applier) apply(ctx context.Context, objs []*unstructured.Unstructured) error {
	for _, obj := range objs {
		if err := a.applyOne(ctx, obj); err != nil {
			return fmt.Errorf("applying %s %s/%s: %w", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
		}
	}
	return nil
}

func (a *applier) applyOne(ctx context.Context, obj *unstructured.Unstructured) error {
	deadline := time.Now().Add(time.Minute)
	for {
		err := a.tryApply(ctx, obj)
		if err == nil || time.Now().After(deadline) || !retriable(err) {
			return err
		}
		a.mapper.Reset()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func (a *applier) tryApply(ctx context.Context, obj *unstructured.Unstructured) error {
	gvk := obj.GroupVersionKind()
	m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return err
	}
	var ri dynamic.ResourceInterface = a.dyn.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		ri = a.dyn.Resource(m.Resource).Namespace(obj.GetNamespace())
	}
	data, err := obj.MarshalJSON()
	if err != nil {
		return err
	}
	force := true
	manager := a.manager
	if manager == "" {
		manager = "tekvirt"
	}
	_, err = ri.Patch(ctx, obj.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{FieldManager: manager, Force: &force})
	return err
}

// retriable reports errors that clear up once a just-created CRD or webhook
// is served.
func retriable(err error) bool {
	if meta.IsNoMatchError(err) {
		return true
	}
	msg := err.Error()
	for _, s := range []string{"failed calling webhook", "connection refused", "no endpoints available", "the server could not find the requested resource"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}
