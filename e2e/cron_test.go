package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/tekvirt/tekvirt/e2e/framework"
	"github.com/tekvirt/tekvirt/e2e/ocibuild"
)

// tlsRegistry is an in-process registry on the node address, serving TLS
// with a certificate from its own CA, as a private registry would; its
// repositories under private/ need basic auth (registryUser, registryPass).
type tlsRegistry struct {
	host string
	ca   []byte
	tr   http.RoundTripper
}

func startTLSRegistry(t *testing.T, f *framework.Framework) *tlsRegistry {
	t.Helper()
	ip := f.NodeIP(t)
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "e2e registry CA"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: ip}, IPAddresses: []net.IP{net.ParseIP(ip)},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); strings.HasPrefix(r.URL.Path, "/v2/private/") && (!ok || u != registryUser || p != registryPass) {
			w.Header().Set("WWW-Authenticate", `Basic realm="e2e"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		reg.ServeHTTP(w, r)
	})
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second,
		TLSConfig: &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}},
		ErrorLog:  log.New(io.Discard, "", 0)}
	go func() { _ = srv.ServeTLS(l, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	return &tlsRegistry{host: l.Addr().String(), ca: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		tr: &http.Transport{TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}}}
}

// Credentials of the test registry's private/ repositories.
const (
	registryUser = "e2e"
	registryPass = "e2e-secret"
)

// push builds an image of files (and env, to vary the digest) as repo:tag.
func (r *tlsRegistry) push(t *testing.T, repo string, files map[string]ocibuild.File, env ...string) string {
	t.Helper()
	img, err := ocibuild.Build(ocibuild.Spec{Files: files, Env: env})
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(r.host + "/" + repo)
	if err != nil {
		t.Fatal(err)
	}
	auth := remote.WithAuth(&authn.Basic{Username: registryUser, Password: registryPass})
	if err := remote.Write(ref, img, remote.WithTransport(r.tr), auth); err != nil {
		t.Fatal(err)
	}
	d, _ := img.Digest()
	return d.String()
}

// TestDataImportCron: a cron on a private TLS registry imports the image
// at once, publishes its DataSource, imports again when the tag moves to a
// new digest, repoints the DataSource and collects the old import; a VM
// boots from a clone of the DataSource. An image without /disk/ fails its
// DataVolume naming the cause.
func TestDataImportCron(t *testing.T) {
	t.Parallel() // mostly waiting on Pods and runs: see "Parallel" in doc.go
	f := framework.New(t)
	c := f.VMClient(t)
	ns := f.Namespace(t)
	ctx := context.Background()
	reg := startTLSRegistry(t, f)
	disk := map[string]ocibuild.File{"/disk/guest.qcow2": {Source: filepath.Join(f.GuestDir(), "guest.qcow2"), Mode: 0o644}}
	first := reg.push(t, "os/guest:latest", disk, "BUILD=1")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "registry-ca"}, Data: map[string]string{"ca.crt": string(reg.ca)}}
	if err := c.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	url, caName, keep := "docker://"+reg.host+"/os/guest:latest", cm.Name, int32(1)
	size := corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("128Mi")}}
	cron := &cdiv1.DataImportCron{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "guest-cron"},
		Spec: cdiv1.DataImportCronSpec{Schedule: "* * * * *", ManagedDataSource: "guest", ImportsToKeep: &keep,
			Template: cdiv1.DataVolume{Spec: cdiv1.DataVolumeSpec{
				Source:  &cdiv1.DataVolumeSource{Registry: &cdiv1.DataVolumeSourceRegistry{URL: &url, CertConfigMap: &caName}},
				Storage: &cdiv1.StorageSpec{Resources: size}}}}}
	start := time.Now()
	if err := c.Create(ctx, cron); err != nil {
		t.Fatal(err)
	}
	ds := &cdiv1.DataSource{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "guest"}}
	firstPVC := waitPublished(t, c, ds, first)
	t.Logf("cron create -> DataSource Ready on %s: %s", firstPVC, time.Since(start).Round(100*time.Millisecond))

	second := reg.push(t, "os/guest:latest", disk, "BUILD=2")
	start = time.Now()
	secondPVC := waitPublished(t, c, ds, second)
	t.Logf("new digest -> DataSource repointed to %s: %s", secondPVC, time.Since(start).Round(100*time.Millisecond))
	framework.Eventually(t, time.Minute, "the old import collected (importsToKeep 1)", func() error {
		old := &cdiv1.DataVolume{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: firstPVC}, old); err == nil {
			return fmt.Errorf("DataVolume %s still there", firstPVC)
		}
		return nil
	})
	// The status is patched after the old import is collected, in the same
	// reconcile: it may trail the deletion by a moment.
	framework.Eventually(t, 30*time.Second, "the cron's status names the new import", func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(cron), cron); err != nil {
			return err
		}
		if cron.Status.LastImportedPVC == nil || cron.Status.LastImportedPVC.Name != secondPVC {
			return fmt.Errorf("lastImportedPVC %+v, want %s", cron.Status.LastImportedPVC, secondPVC)
		}
		return nil
	})

	vm := framework.GuestVM(ns, "from-cron", framework.GuestImage, v1.RunStrategyAlways)
	vm.Spec.DataVolumeTemplates = []v1.DataVolumeTemplateSpec{{ObjectMeta: metav1.ObjectMeta{Name: "from-cron-disk"},
		Spec: cdiv1.DataVolumeSpec{SourceRef: &cdiv1.DataVolumeSourceRef{Kind: cdiv1.DataVolumeDataSource, Name: "guest"}, Storage: &cdiv1.StorageSpec{Resources: size}}}}
	vm.Spec.Template.Spec.Volumes[0] = v1.Volume{Name: "containerdisk", VolumeSource: v1.VolumeSource{DataVolume: &v1.DataVolumeSource{Name: "from-cron-disk"}}}
	if err := c.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}

	reg.push(t, "os/nodisk:1", map[string]ocibuild.File{"/etc/motd": {Source: filepath.Join(f.GuestDir(), "guest.qcow2"), Mode: 0o644}})
	nodiskURL := "docker://" + reg.host + "/os/nodisk:1"
	nodisk := &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nodisk"}, Spec: cdiv1.DataVolumeSpec{
		Source:  &cdiv1.DataVolumeSource{Registry: &cdiv1.DataVolumeSourceRegistry{URL: &nodiskURL, CertConfigMap: &caName}},
		Storage: &cdiv1.StorageSpec{Resources: size}}}
	if err := c.Create(ctx, nodisk); err != nil {
		t.Fatal(err)
	}
	waitDVPhase(t, c, nodisk, cdiv1.Failed)
	if msg := readyMessage(nodisk); !strings.Contains(msg, "has no disk file under /disk/") || nodisk.Status.RestartCount != 0 {
		t.Errorf("image without /disk/: restarts %d, message %q", nodisk.Status.RestartCount, msg)
	}
	framework.WaitVMI(t, c, ns, vm.Name, 3*time.Minute, "booted from the cron's DataSource", framework.AgentConnected)
}

// TestDataImportCronSecretRef: a cron on a registry that wants credentials
// logs in with its template's secretRef, both to read the digest and to
// import; without one its UpToDate condition says what is missing.
func TestDataImportCronSecretRef(t *testing.T) {
	f := framework.New(t)
	c := f.VMClient(t)
	ns := f.Namespace(t)
	ctx := context.Background()
	reg := startTLSRegistry(t, f)
	digest := reg.push(t, "private/guest:latest", map[string]ocibuild.File{
		"/disk/guest.qcow2": {Source: filepath.Join(f.GuestDir(), "guest.qcow2"), Mode: 0o644}})
	objs := []client.Object{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "registry-ca"}, Data: map[string]string{"ca.crt": string(reg.ca)}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "registry-login"},
			StringData: map[string]string{"accessKeyId": registryUser, "secretKey": registryPass}},
	}
	url, caName, secret := "docker://"+reg.host+"/private/guest:latest", "registry-ca", "registry-login"
	size := corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("128Mi")}}
	cron := func(name string, secretRef *string) *cdiv1.DataImportCron {
		return &cdiv1.DataImportCron{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: cdiv1.DataImportCronSpec{Schedule: "0 0 * * *", ManagedDataSource: name,
				Template: cdiv1.DataVolume{Spec: cdiv1.DataVolumeSpec{
					Source:  &cdiv1.DataVolumeSource{Registry: &cdiv1.DataVolumeSourceRegistry{URL: &url, CertConfigMap: &caName, SecretRef: secretRef}},
					Storage: &cdiv1.StorageSpec{Resources: size}}}}}
	}
	anonymous := cron("anonymous", nil)
	objs = append(objs, cron("with-login", &secret), anonymous)
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	waitPublished(t, c, &cdiv1.DataSource{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "with-login"}}, digest)
	framework.Eventually(t, time.Minute, "the cron without secretRef reports the registry's 401", func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(anonymous), anonymous); err != nil {
			return err
		}
		for _, cond := range anonymous.Status.Conditions {
			if cond.Type == cdiv1.DataImportCronUpToDate && cond.Reason == "DigestError" && strings.Contains(cond.Message, "(401)") &&
				strings.Contains(cond.Message, "secretRef") {
				return nil
			}
		}
		return fmt.Errorf("conditions %+v", anonymous.Status.Conditions)
	})
	if len(anonymous.Status.CurrentImports) != 0 {
		t.Errorf("the cron without credentials started imports: %+v", anonymous.Status.CurrentImports)
	}
}

// waitPublished waits for ds to be Ready on the import of digest and
// returns that import's name.
func waitPublished(t *testing.T, c client.Client, ds *cdiv1.DataSource, digest string) string {
	t.Helper()
	var pvc string
	framework.Eventually(t, 3*time.Minute, "DataSource "+ds.Name+" Ready on the import of "+digest[:19], func() error {
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(ds), ds); err != nil {
			return err
		}
		p := ds.Status.Source.PVC
		if p == nil {
			return fmt.Errorf("no source yet")
		}
		dv := &cdiv1.DataVolume{}
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: p.Namespace, Name: p.Name}, dv); err != nil {
			return err
		}
		if dv.Annotations["cdi.kubevirt.io/storage.import.sourceDesiredDigest"] != digest {
			return fmt.Errorf("points at %s (digest %s)", p.Name, dv.Annotations["cdi.kubevirt.io/storage.import.sourceDesiredDigest"])
		}
		for _, cond := range ds.Status.Conditions {
			if cond.Type == cdiv1.DataSourceReady && cond.Status == corev1.ConditionTrue {
				pvc = p.Name
				return nil
			}
		}
		return fmt.Errorf("not Ready: %+v", ds.Status.Conditions)
	})
	return pvc
}
