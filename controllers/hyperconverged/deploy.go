package hyperconverged

import (
	"context"
	"fmt"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hcov1beta1 "github.com/tekvirt/tekvirt/controllers/apis/hco/v1beta1"
	ctrlconfig "github.com/tekvirt/tekvirt/controllers/config"
)

// deploy issues the certificates, applies every component and notes in
// obs which are not ready yet; it returns when a certificate is next due
// for renewal.
func (r *Reconciler) deploy(ctx context.Context, hc *hcov1beta1.HyperConverged, obs *observed) (time.Time, error) {
	c, renew, err := r.certificates(ctx)
	if err != nil {
		return time.Time{}, fmt.Errorf("issuing certificates: %w", err)
	}
	nac, addons, err := networkAddonsConfig(hc)
	if err != nil {
		return time.Time{}, err
	}
	on, off := networkAddonFiles(addons)
	objs, err := render(r.Images, c, hc.Annotations[ContainerDiskMaxBytesAnnotation], on...)
	if err != nil {
		return time.Time{}, err
	}
	objs = append(objs, nac)
	// The add-ons the NetworkAddonsConfig turns off go, as CNAO removes
	// them.
	gone, err := renderFiles(r.Images, off)
	if err != nil {
		return time.Time{}, err
	}
	for _, o := range gone {
		if err := r.Client.Delete(ctx, o); err != nil && !apierrors.IsNotFound(err) {
			return time.Time{}, fmt.Errorf("removing %s %s, which the NetworkAddonsConfig turns off: %w", o.GetKind(), key(o), err)
		}
	}
	hc.Status.RelatedObjects = hc.Status.RelatedObjects[:0]
	for _, o := range objs {
		if err := r.replaceImmutable(ctx, o); err != nil {
			return time.Time{}, err
		}
		if err := r.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), fieldOwner, client.ForceOwnership); err != nil {
			return time.Time{}, fmt.Errorf("applying %s %s: %w", o.GetKind(), key(o), err)
		}
		hc.Status.RelatedObjects = append(hc.Status.RelatedObjects, corev1.ObjectReference{
			APIVersion: o.GetAPIVersion(), Kind: o.GetKind(), Namespace: o.GetNamespace(), Name: o.GetName()})
		ready, err := r.ready(ctx, o)
		if err != nil {
			return time.Time{}, err
		}
		if !ready {
			obs.notReady = append(obs.notReady, o.GetKind()+" "+key(o))
		}
	}
	obs.components, obs.version = len(objs), r.Images.Version()
	if err := r.networkAddonsStatus(ctx, obs.notReady, obs.version); err != nil {
		return time.Time{}, err
	}
	return renew, nil
}

func key(o *unstructured.Unstructured) string {
	if o.GetNamespace() == "" {
		return o.GetName()
	}
	return o.GetNamespace() + "/" + o.GetName()
}

// ready reports whether a workload runs its current template everywhere it
// should; other objects are ready once applied.
func (r *Reconciler) ready(ctx context.Context, o *unstructured.Unstructured) (bool, error) {
	k := client.ObjectKeyFromObject(o)
	switch o.GetKind() {
	case "Deployment":
		d := &appsv1.Deployment{}
		if err := r.Client.Get(ctx, k, d); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return deploymentReady(d), nil
	case "DaemonSet":
		d := &appsv1.DaemonSet{}
		if err := r.Client.Get(ctx, k, d); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return daemonSetReady(d), nil
	}
	return true, nil
}

func deploymentReady(d *appsv1.Deployment) bool {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	s := d.Status
	return s.ObservedGeneration >= d.Generation && s.UpdatedReplicas >= want && s.AvailableReplicas >= want && s.Replicas == s.UpdatedReplicas
}

func daemonSetReady(d *appsv1.DaemonSet) bool {
	s := d.Status
	return s.ObservedGeneration >= d.Generation && s.UpdatedNumberScheduled == s.DesiredNumberScheduled && s.NumberAvailable == s.DesiredNumberScheduled
}

// certificates returns the CA bundle and the serving certificates,
// renewing each that is missing, due, for other names or from another CA,
// and when the next one falls due.
func (r *Reconciler) certificates(ctx context.Context) (certs, time.Time, error) {
	now := r.now()
	ca, prevPEM, err := r.ensureCA(ctx, now)
	if err != nil {
		return certs{}, time.Time{}, err
	}
	nodes, err := r.nodeNames(ctx)
	if err != nil {
		return certs{}, time.Time{}, err
	}
	out := certs{caBundle: bundle(*ca, prevPEM, now)}
	next := renewAt(ca.Cert)
	for _, l := range []struct {
		secret client.ObjectKey
		names  []string
		// client: the certificate is a client's too.
		client bool
		into   *keyPair
	}{
		{client.ObjectKey{Namespace: ctrlconfig.Namespace, Name: ctrlconfig.WebhookSecret}, webhookDNSNames(), false, &out.webhook},
		{client.ObjectKey{Namespace: ctrlconfig.NodeNamespace, Name: ctrlconfig.HandlerCertSecret}, nodes, true, &out.handler},
		{client.ObjectKey{Namespace: ctrlconfig.Namespace, Name: ctrlconfig.DownloadsSecret}, downloadsDNSNames(), false, &out.downloads},
	} {
		leaf, _, err := r.loadPair(ctx, l.secret)
		if err != nil {
			return certs{}, time.Time{}, err
		}
		if leaf == nil || !leafCurrent(leaf.Cert, ca.Cert, l.names, l.client, now) {
			fresh, err := issue(*ca, l.names, l.client, now)
			if err != nil {
				return certs{}, time.Time{}, fmt.Errorf("issuing %s: %w", l.secret, err)
			}
			leaf = &fresh
		}
		*l.into = *leaf
		if at := renewAt(leaf.Cert); at.Before(next) {
			next = at
		}
	}
	return out, next, nil
}

// ensureCA returns the operator's CA, made anew when it is missing or due
// for renewal, and the certificate of the CA it replaced.
func (r *Reconciler) ensureCA(ctx context.Context, now time.Time) (*keyPair, []byte, error) {
	ca, previous, err := r.loadPair(ctx, client.ObjectKey{Namespace: ctrlconfig.Namespace, Name: caSecretName})
	if err != nil || (ca != nil && now.Before(renewAt(ca.Cert))) {
		return ca, previous, err
	}
	previous = nil
	if ca != nil {
		previous = ca.CertPEM
	}
	fresh, err := newCA(now)
	if err != nil {
		return nil, nil, err
	}
	secret := tlsSecret(caSecretName, ctrlconfig.Namespace, fresh)
	if len(previous) > 0 {
		if err := unstructured.SetNestedField(secret.Object, encode(previous), "data", "previous.crt"); err != nil {
			return nil, nil, err
		}
	}
	secret.SetLabels(map[string]string{ManagedByLabel: ManagedBy, "app.kubernetes.io/part-of": "tekvirt"})
	if err := r.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(secret), fieldOwner, client.ForceOwnership); err != nil {
		return nil, nil, fmt.Errorf("storing the CA: %w", err)
	}
	return &fresh, previous, nil
}

// loadPair reads the key pair in a TLS Secret (nil when it is missing or
// unreadable, so that it is replaced) and its previous.crt.
func (r *Reconciler) loadPair(ctx context.Context, k client.ObjectKey) (*keyPair, []byte, error) {
	s := &corev1.Secret{}
	if err := r.Client.Get(ctx, k, s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil, nil
		}
		return nil, nil, fmt.Errorf("reading Secret %s: %w", k, err)
	}
	kp, err := parsePair(s.Data["tls.crt"], s.Data["tls.key"])
	if err != nil {
		return nil, s.Data["previous.crt"], nil
	}
	return &kp, s.Data["previous.crt"], nil
}

// nodeNames are the names the handlers' certificate is for: every node's,
// sorted, since each handler serves as its node (execute-in-vm verifies the
// name of the VMI's node).
func (r *Reconciler) nodeNames(ctx context.Context) ([]string, error) {
	nodes := &metav1.PartialObjectMetadataList{}
	nodes.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NodeList"))
	if err := r.Client.List(ctx, nodes); err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	names := make([]string, 0, len(nodes.Items))
	for _, n := range nodes.Items {
		names = append(names, n.Name)
	}
	slices.Sort(names)
	if len(names) == 0 {
		// A certificate needs a name; this one is replaced when a node joins.
		names = []string{ctrlconfig.HandlerDaemonSet + "." + ctrlconfig.NodeNamespace}
	}
	return names, nil
}
