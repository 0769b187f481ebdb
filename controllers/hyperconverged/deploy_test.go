package hyperconverged

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tekvirt/tekvirt/contracts/hoststorage"
	"github.com/tekvirt/tekvirt/contracts/trust"
	hcov1beta1 "github.com/tekvirt/tekvirt/controllers/apis/hco/v1beta1"
	nacv1 "github.com/tekvirt/tekvirt/controllers/apis/networkaddons/v1"
	ctrlconfig "github.com/tekvirt/tekvirt/controllers/config"
	"github.com/tekvirt/tekvirt/controllers/testenv"
)

func testImages() Images {
	images := Images{}
	for i, p := range Programs {
		images[p] = fmt.Sprintf("registry.example/tekvirt/%s@sha256:%064d", path.Base(p), i)
	}
	return images
}

// startOperator runs the reconciler with component images against a real
// API server (no controllers: the test reports the workloads' status), in
// a cluster of one node, node-a.
func startOperator(t *testing.T) client.Client {
	t.Helper()
	images := testImages()
	c := startReconciler(t, &Reconciler{StepImage: images["github.com/tekvirt/tekvirt/cmd/tekvirt-step"], Images: images})
	ctx := context.Background()
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ctrlconfig.NodeNamespace}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}},
	} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// verifies checks that the Secret's certificate verifies with bundle for name.
func verifies(c client.Client, bundle []byte, secret client.ObjectKey, name string) error {
	s := &corev1.Secret{}
	if err := c.Get(context.Background(), secret, s); err != nil {
		return err
	}
	b, _ := pem.Decode(s.Data["tls.crt"])
	if b == nil {
		return fmt.Errorf("Secret %s holds no certificate", secret)
	}
	cert, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(bundle)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: name}); err != nil {
		return fmt.Errorf("Secret %s for %s: %w", secret, name, err)
	}
	return nil
}

func TestOperatorDeploysCertifiesAndRestoresComponents(t *testing.T) {
	c := startOperator(t)
	ctx := context.Background()
	// The default class as the release before the CSI driver made it:
	// its provisioner cannot be updated, so the class is replaced.
	legacy := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "tekvirt-hostpath"}, Provisioner: "tekvirt.io/hostpath"}
	if err := c.Create(ctx, legacy); err != nil {
		t.Fatal(err)
	}
	hc := &hcov1beta1.HyperConverged{ObjectMeta: metav1.ObjectMeta{Name: SingletonName, Namespace: ctrlconfig.Namespace,
		Annotations: map[string]string{ContainerDiskMaxBytesAnnotation: "1073741824"}}}
	if err := c.Create(ctx, hc); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(hc)
	testenv.Eventually(t, "waiting for the components", func() error {
		cond, _, err := condition(c, key, ConditionAvailable)
		if err != nil {
			return err
		}
		if cond.Status != metav1.ConditionFalse || cond.Reason != ReasonNotReady || !containsAll(cond.Message, "Deployment tekvirt-system/tekvirt-controller", "DaemonSet tekvirt-node/tekvirt-handler") {
			return fmt.Errorf("Available = %s/%s: %s", cond.Status, cond.Reason, cond.Message)
		}
		return nil
	})
	handler := &appsv1.DaemonSet{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ctrlconfig.NodeNamespace, Name: ctrlconfig.HandlerDaemonSet}, handler); err != nil {
		t.Fatal(err)
	}
	ctr := handler.Spec.Template.Spec.Containers[0]
	if want := testImages()["github.com/tekvirt/tekvirt/cmd/tekvirt-handler"]; ctr.Image != want || !slices.Contains(ctr.Args, "--container-disk-max-bytes=1073741824") {
		t.Errorf("handler DaemonSet image %s args %v; want %s and the annotation's cap", ctr.Image, ctr.Args, want)
	}
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: trust.Namespace, Name: trust.CABundleConfigMap}, cm); err != nil {
		t.Fatal(err)
	}
	bundle := []byte(cm.Data[trust.CABundleKey])
	hook := &admissionv1.ValidatingWebhookConfiguration{}
	if err := c.Get(ctx, client.ObjectKey{Name: "tekvirt-vm-validator"}, hook); err != nil {
		t.Fatal(err)
	}
	if string(hook.Webhooks[0].ClientConfig.CABundle) != string(bundle) {
		t.Error("the webhook's caBundle is not the published CA bundle")
	}
	if err := verifies(c, bundle, client.ObjectKey{Namespace: ctrlconfig.Namespace, Name: ctrlconfig.WebhookSecret}, "tekvirt-webhook.tekvirt-system.svc"); err != nil {
		t.Error(err)
	}
	if err := verifies(c, bundle, client.ObjectKey{Namespace: ctrlconfig.NodeNamespace, Name: ctrlconfig.HandlerCertSecret}, "node-a"); err != nil {
		t.Error(err)
	}
	// The handlers verify each other (live migration) by the bundle their
	// Secret holds, with a certificate that is a client's too.
	hs := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ctrlconfig.NodeNamespace, Name: ctrlconfig.HandlerCertSecret}, hs); err != nil {
		t.Fatal(err)
	}
	if string(hs.Data["ca.crt"]) != string(bundle) {
		t.Error("the handlers' Secret does not hold the CA bundle as ca.crt")
	}
	if b, _ := pem.Decode(hs.Data["tls.crt"]); b == nil {
		t.Error("the handlers' Secret holds no certificate")
	} else if cert, err := x509.ParseCertificate(b.Bytes); err != nil || !slices.Contains(cert.ExtKeyUsage, x509.ExtKeyUsageClientAuth) {
		t.Errorf("the handlers' certificate is no client's: %v", err)
	}
	if err := verifies(c, bundle, client.ObjectKey{Namespace: ctrlconfig.Namespace, Name: ctrlconfig.DownloadsSecret}, "tekvirt-cli-downloads.tekvirt-system.svc"); err != nil {
		t.Error(err)
	}

	class := &storagev1.StorageClass{}
	if err := c.Get(ctx, client.ObjectKey{Name: "tekvirt-hostpath"}, class); err != nil || class.Provisioner != hoststorage.DriverName {
		t.Errorf("default StorageClass: provisioner %q, %v; want the CSI driver's", class.Provisioner, err)
	}

	markReady(t, c)
	testenv.Eventually(t, "HyperConverged Available", func() error {
		cond, got, err := condition(c, key, ConditionAvailable)
		if err != nil {
			return err
		}
		if cond.Status != metav1.ConditionTrue {
			return fmt.Errorf("Available = %s: %s", cond.Status, cond.Message)
		}
		if want := testImages().Version(); len(got.Status.Versions) != 1 || got.Status.Versions[0].Version != want {
			return fmt.Errorf("versions %v, want %s", got.Status.Versions, want)
		}
		if !slices.ContainsFunc(got.Status.RelatedObjects, func(r corev1.ObjectReference) bool {
			return r.Kind == "DaemonSet" && r.Name == ctrlconfig.HandlerDaemonSet && r.Namespace == ctrlconfig.NodeNamespace
		}) {
			return fmt.Errorf("relatedObjects %v do not name the handler DaemonSet", got.Status.RelatedObjects)
		}
		return nil
	})

	settle(t, c, key)
	// Settled: only the new Node can start a reconcile.
	if err := c.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-b"}}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the handlers' certificate reissued for a new node", func() error {
		return verifies(c, bundle, client.ObjectKey{Namespace: ctrlconfig.NodeNamespace, Name: ctrlconfig.HandlerCertSecret}, "node-b")
	})
	// The network add-ons: NetworkAddonsConfig "cluster" with the MAC pool
	// on, Available, named among the related objects; restored when
	// deleted, with the same range.
	nac := &nacv1.NetworkAddonsConfig{}
	testenv.Eventually(t, "NetworkAddonsConfig cluster Available", func() error {
		if err := c.Get(ctx, client.ObjectKey{Name: nacv1.Name}, nac); err != nil {
			return err
		}
		if mp := nac.Spec.KubeMacPool; mp == nil || !strings.HasPrefix(mp.RangeStart, "02:") || !strings.HasSuffix(mp.RangeEnd, ":ff:ff:ff") || mp.RangeStart[:8] != mp.RangeEnd[:8] {
			return fmt.Errorf("kubeMacPool %+v, want a 02:XX:XX range", mp)
		}
		if !slices.ContainsFunc(nac.Status.Conditions, func(c nacv1.Condition) bool { return c.Type == "Available" && c.Status == corev1.ConditionTrue }) {
			return fmt.Errorf("conditions %+v", nac.Status.Conditions)
		}
		got := &hcov1beta1.HyperConverged{}
		if err := c.Get(ctx, key, got); err != nil {
			return err
		}
		if !slices.ContainsFunc(got.Status.RelatedObjects, func(r corev1.ObjectReference) bool { return r.Kind == "NetworkAddonsConfig" && r.Name == nacv1.Name }) {
			return fmt.Errorf("relatedObjects %v do not name the NetworkAddonsConfig", got.Status.RelatedObjects)
		}
		return nil
	})
	if err := c.Delete(ctx, nac); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "deleted NetworkAddonsConfig restored", func() error {
		got := &nacv1.NetworkAddonsConfig{}
		if err := c.Get(ctx, client.ObjectKey{Name: nacv1.Name}, got); err != nil {
			return err
		}
		if got.UID == nac.UID || *got.Spec.KubeMacPool != *nac.Spec.KubeMacPool {
			return fmt.Errorf("uid %s (was %s), pool %+v (was %+v)", got.UID, nac.UID, got.Spec.KubeMacPool, nac.Spec.KubeMacPool)
		}
		return nil
	})

	// HCO's patch that turns Multus off removes its DaemonSet, and the
	// NetworkAddonsConfig says so.
	multus := client.ObjectKey{Namespace: ctrlconfig.NodeNamespace, Name: ctrlconfig.MultusDaemonSet}
	if err := c.Get(ctx, multus, &appsv1.DaemonSet{}); err != nil {
		t.Fatalf("the Multus DaemonSet: %v", err)
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, NetworkAddonsJSONPatchAnnotation, `[{"op":"remove","path":"/spec/multus"}]`)
	if err := c.Patch(ctx, &hcov1beta1.HyperConverged{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "Multus turned off", func() error {
		if err := c.Get(ctx, multus, &appsv1.DaemonSet{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("the Multus DaemonSet: %w, want it gone", err)
		}
		got := &nacv1.NetworkAddonsConfig{}
		if err := c.Get(ctx, client.ObjectKey{Name: nacv1.Name}, got); err != nil {
			return err
		}
		if got.Spec.Multus != nil || got.Spec.LinuxBridge == nil {
			return fmt.Errorf("NetworkAddonsConfig spec %+v, want linuxBridge without multus", got.Spec)
		}
		return nil
	})

	if err := c.Delete(ctx, handler); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "deleted handler DaemonSet restored", func() error {
		got := &appsv1.DaemonSet{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(handler), got); err != nil {
			return err
		}
		if got.UID == handler.UID {
			return fmt.Errorf("old object still there")
		}
		return nil
	})
}

// TestOperatorRemovesComponentsWithTheHyperConverged: deleting the
// HyperConverged (the webhook allowed it: no VMs) removes what it deployed.
func TestOperatorRemovesComponentsWithTheHyperConverged(t *testing.T) {
	c := startOperator(t)
	ctx := context.Background()
	hc := &hcov1beta1.HyperConverged{ObjectMeta: metav1.ObjectMeta{Name: SingletonName, Namespace: ctrlconfig.Namespace}}
	if err := c.Create(ctx, hc); err != nil {
		t.Fatal(err)
	}
	handler := client.ObjectKey{Namespace: ctrlconfig.NodeNamespace, Name: ctrlconfig.HandlerDaemonSet}
	testenv.Eventually(t, "handler DaemonSet deployed", func() error { return c.Get(ctx, handler, &appsv1.DaemonSet{}) })
	// No controller serves the deployed webhook here, and it fails closed:
	// delete it and the HyperConverged before the operator puts it back.
	testenv.Eventually(t, "HyperConverged deletion admitted", func() error {
		hook := &admissionv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "tekvirt-vm-validator"}}
		if err := c.Delete(ctx, hook); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		return c.Delete(ctx, hc)
	})
	testenv.Eventually(t, "components removed with the HyperConverged", func() error {
		for key, obj := range map[client.ObjectKey]client.Object{
			handler: &appsv1.DaemonSet{},
			{Namespace: ctrlconfig.Namespace, Name: "tekvirt-controller"}: &appsv1.Deployment{},
			{Namespace: ctrlconfig.Namespace, Name: caSecretName}:         &corev1.Secret{},
			{Name: "tekvirt-vm-validator"}:                                &admissionv1.ValidatingWebhookConfiguration{},
			{Namespace: trust.Namespace, Name: trust.CABundleConfigMap}:   &corev1.ConfigMap{},
		} {
			if err := c.Get(ctx, key, obj); err == nil || !apierrors.IsNotFound(err) {
				return fmt.Errorf("%T %s still there (%w)", obj, key, err)
			}
		}
		return nil
	})
}

// settle waits until the HyperConverged has not changed for two seconds,
// so that no reconcile its last status change started is still running.
func settle(t *testing.T, c client.Client, key client.ObjectKey) {
	t.Helper()
	last, stable := "", 0
	testenv.Eventually(t, "HyperConverged settled", func() error {
		hc := &hcov1beta1.HyperConverged{}
		if err := c.Get(context.Background(), key, hc); err != nil {
			return err
		}
		if hc.ResourceVersion == last {
			stable++
		} else {
			last, stable = hc.ResourceVersion, 0
		}
		if stable < 4 {
			time.Sleep(500 * time.Millisecond)
			return fmt.Errorf("resourceVersion %s for %d polls", last, stable)
		}
		return nil
	})
}

// markReady reports the operator's workloads as running everywhere, as the
// Deployment and DaemonSet controllers would.
func markReady(t *testing.T, c client.Client) {
	t.Helper()
	ctx := context.Background()
	for _, name := range []string{"tekvirt-controller", ctrlconfig.DownloadsDeployment, ctrlconfig.SnapshotControllerDeployment} {
		d := &appsv1.Deployment{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ctrlconfig.Namespace, Name: name}, d); err != nil {
			t.Fatal(err)
		}
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 1, UpdatedReplicas: 1, AvailableReplicas: 1, ReadyReplicas: 1}
		if err := c.Status().Update(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{ctrlconfig.HandlerDaemonSet, ctrlconfig.HostpathDaemonSet, ctrlconfig.MultusDaemonSet, ctrlconfig.BridgePluginDaemonSet} {
		ds := &appsv1.DaemonSet{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ctrlconfig.NodeNamespace, Name: name}, ds); err != nil {
			t.Fatal(err)
		}
		ds.Status = appsv1.DaemonSetStatus{ObservedGeneration: ds.Generation, DesiredNumberScheduled: 1, CurrentNumberScheduled: 1,
			UpdatedNumberScheduled: 1, NumberAvailable: 1, NumberReady: 1}
		if err := c.Status().Update(ctx, ds); err != nil {
			t.Fatal(err)
		}
	}
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
