package hostedservices

import (
	"context"
	"crypto/sha256"
	"fmt"
	"sync"
	"time"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/event"

	hc "github.com/tekvirt/tekvirt/contracts/hostedcluster"
)

// EventSource is the component named by the events this package records
// on hosted Services.
const EventSource = "tekvirt-hosted-services"

// syncTimeout bounds the first listing of a hosted cluster's objects.
const syncTimeout = 20 * time.Second

// hosted is what this package reads of one hosted cluster (from informers
// of its API server) and the client it writes there with.
type hosted struct {
	digest   [32]byte // of the kubeconfig it was made with
	client   kubernetes.Interface
	services corelisters.ServiceLister
	nodes    corelisters.NodeLister
	slices   discoverylisters.EndpointSliceLister
	recorder record.EventRecorder
	close    func()
}

// watches are the hosted clusters watched, by HostedCluster; each change
// that matters to a published Service is sent to events as its
// HostedCluster.
type watches struct {
	mu     sync.Mutex
	hosted map[types.NamespacedName]*hosted
	events chan event.TypedGenericEvent[*hyperv1.HostedCluster]
}

func newWatches() *watches {
	return &watches{hosted: map[types.NamespacedName]*hosted{}, events: make(chan event.TypedGenericEvent[*hyperv1.HostedCluster], 256)}
}

// ensure returns the watch of cluster key's hosted cluster through
// kubeconfig, starting it (or starting it again, when the kubeconfig
// changed) and waiting for its first listing.
func (w *watches) ensure(ctx context.Context, key types.NamespacedName, kubeconfig []byte) (*hosted, error) {
	digest := sha256.Sum256(kubeconfig)
	w.mu.Lock()
	h := w.hosted[key]
	w.mu.Unlock()
	if h != nil && h.digest == digest {
		return h, nil
	}
	w.stop(key)
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("the hosted cluster's kubeconfig: %w", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	factory := informers.NewSharedInformerFactory(cs, 0)
	h = &hosted{
		digest: digest, client: cs,
		services: factory.Core().V1().Services().Lister(),
		nodes:    factory.Core().V1().Nodes().Lister(),
		slices:   factory.Discovery().V1().EndpointSlices().Lister(),
	}
	runCtx, cancel := context.WithCancel(context.Background())
	if err := w.notify(runCtx, key, factory, h); err != nil {
		cancel()
		return nil, err
	}
	factory.Start(runCtx.Done())
	syncCtx, done := context.WithTimeout(ctx, syncTimeout)
	defer done()
	for typ, ok := range factory.WaitForCacheSync(syncCtx.Done()) {
		if !ok {
			cancel()
			factory.Shutdown()
			return nil, fmt.Errorf("the hosted API server did not list its %v within %s", typ, syncTimeout)
		}
	}
	events := record.NewBroadcaster(record.WithContext(runCtx))
	events.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")})
	h.recorder = events.NewRecorder(scheme.Scheme, corev1.EventSource{Component: EventSource})
	h.close = func() {
		cancel()
		events.Shutdown()
		factory.Shutdown()
	}
	w.mu.Lock()
	w.hosted[key] = h
	w.mu.Unlock()
	return h, nil
}

// stop ends the watch of cluster key, if any.
func (w *watches) stop(key types.NamespacedName) {
	w.mu.Lock()
	h := w.hosted[key]
	delete(w.hosted, key)
	w.mu.Unlock()
	if h != nil && h.close != nil {
		h.close()
	}
}

// Start blocks until ctx ends, then stops every watch: it runs as one of
// the manager's runnables, so that no hosted watch outlives the manager.
func (w *watches) Start(ctx context.Context) error {
	<-ctx.Done()
	w.mu.Lock()
	keys := make([]types.NamespacedName, 0, len(w.hosted))
	for k := range w.hosted {
		keys = append(keys, k)
	}
	w.mu.Unlock()
	for _, k := range keys {
		w.stop(k)
	}
	return nil
}

// notify sends cluster key to w.events on the changes that matter: to a
// published Service or the router's, to whether a Node is Ready, to the
// EndpointSlices of a published Service that keeps traffic on its
// endpoints' nodes. Sending gives up once ctx ends, so that a stopping
// watch never waits for a controller that has stopped.
func (w *watches) notify(ctx context.Context, key types.NamespacedName, factory informers.SharedInformerFactory, h *hosted) error {
	send := func() {
		select {
		case w.events <- event.TypedGenericEvent[*hyperv1.HostedCluster]{Object: &hyperv1.HostedCluster{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}}:
		case <-ctx.Done():
		}
	}
	service := func(o any) bool {
		svc, ok := o.(*corev1.Service)
		if !ok {
			return true // a deletion seen late: look again
		}
		return svc.Spec.Type == corev1.ServiceTypeLoadBalancer || (svc.Namespace == hc.RouterNamespace && svc.Name == hc.RouterService)
	}
	if _, err := factory.Core().V1().Services().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { ifThen(service(o), send) },
		UpdateFunc: func(old, o any) { ifThen(service(old) || service(o), send) },
		DeleteFunc: func(o any) { ifThen(service(o), send) },
	}); err != nil {
		return err
	}
	ready := func(o any) bool { n, _ := o.(*corev1.Node); return nodeReady(n) }
	if _, err := factory.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { send() },
		UpdateFunc: func(old, o any) { ifThen(ready(old) != ready(o), send) },
		DeleteFunc: func(any) { send() },
	}); err != nil {
		return err
	}
	local := func(o any) bool {
		s, ok := o.(*discoveryv1.EndpointSlice)
		if !ok {
			return true
		}
		svc, err := h.services.Services(s.Namespace).Get(s.Labels[discoveryv1.LabelServiceName])
		return err == nil && Publishes(svc) && svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
	}
	_, err := factory.Discovery().V1().EndpointSlices().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { ifThen(local(o), send) },
		UpdateFunc: func(_, o any) { ifThen(local(o), send) },
		DeleteFunc: func(o any) { ifThen(local(o), send) },
	})
	return err
}

func ifThen(cond bool, f func()) {
	if cond {
		f()
	}
}
