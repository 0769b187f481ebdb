package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	uploadv1beta1 "kubevirt.io/containerized-data-importer-api/pkg/apis/upload/v1beta1"

	ctrlconfig "github.com/tekvirt/tekvirt/controllers/config"
	"github.com/tekvirt/tekvirt/controllers/datavolume"
	"github.com/tekvirt/tekvirt/e2e/framework"
	"github.com/tekvirt/tekvirt/tasks/kube"
)

// TestImageUpload: `tekvirt image-upload` puts the guest's qcow2.xz into a
// new DataVolume that a VM then boots from; through the upload proxy, bad
// tokens get 401 and write nothing, a form upload with a token from the
// UploadTokenRequest API succeeds; editors may request tokens, viewers not.
func TestImageUpload(t *testing.T) {
	t.Parallel() // mostly waiting on its own VMs and runs: see "Parallel" in doc.go
	f := framework.New(t)
	c := f.VMClient(t)
	ns := f.Namespace(t)
	ctx := context.Background()
	guest := f.GuestDir()

	out := tekvirt(t, f, "image-upload", "dv", "uploaded", "-n", ns, "--size=128Mi", "--image-path="+filepath.Join(guest, "guest.qcow2.xz"))
	for _, want := range []string{"is UploadReady", "100.0%", "DataVolume " + ns + "/uploaded Succeeded"} {
		if !strings.Contains(out, want) {
			t.Errorf("image-upload output lacks %q:\n%s", want, out)
		}
	}
	vmi := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "uploaded"}, Spec: framework.GuestVMI(framework.GuestImage, "uploaded")}
	vmi.Spec.Volumes[0] = v1.Volume{Name: "containerdisk", VolumeSource: v1.VolumeSource{DataVolume: &v1.DataVolumeSource{Name: "uploaded"}}}
	if err := c.Create(ctx, vmi); err != nil {
		t.Fatal(err)
	}

	dv := &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "by-form"},
		Spec: cdiv1.DataVolumeSpec{Source: &cdiv1.DataVolumeSource{Upload: &cdiv1.DataVolumeSourceUpload{}},
			Storage: &cdiv1.StorageSpec{Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("128Mi")}}}}}
	if err := c.Create(ctx, dv); err != nil {
		t.Fatal(err)
	}
	waitDVPhase(t, c, dv, cdiv1.UploadReady)
	// What virtctl image-upload waits for before it sends.
	claimPodAnnotations(t, c, ns, dv.Name, "Running", "true")
	token := uploadToken(t, c, ns, dv.Name)
	proxy := uploadProxy(t, f, c)
	raw, err := os.ReadFile(filepath.Join(guest, "guest.raw"))
	if err != nil {
		t.Fatal(err)
	}
	tampered := token[:len(token)-4] + "AAAA"
	for name, tok := range map[string]string{"no token": "", "tampered token": tampered} {
		code, msg := proxy.post(t, "/v1beta1/upload", tok, "", bytes.NewReader(raw))
		if code != http.StatusUnauthorized {
			t.Errorf("%s: got %d %q, want 401", name, code, msg)
		}
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(dv), dv); err != nil || dv.Status.Phase != cdiv1.UploadReady {
		t.Errorf("after refused uploads the DataVolume is %q (%v), want still UploadReady", dv.Status.Phase, err)
	}
	if entries := volumeFiles(t, c, ns, dv.Name); len(entries) != 0 {
		t.Errorf("refused uploads wrote %v", entries)
	}

	var form bytes.Buffer
	mw := multipart.NewWriter(&form)
	fw, err := mw.CreateFormFile("file", "guest.raw")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = fw.Write(raw)
	_ = mw.Close()
	if code, msg := proxy.post(t, "/v1beta1/upload-form", token, mw.FormDataContentType(), &form); code != http.StatusOK {
		t.Fatalf("form upload: got %d %q", code, msg)
	}
	waitDVPhase(t, c, dv, cdiv1.Succeeded)
	// What virtctl image-upload waits for to say "Processing completed successfully".
	claimPodAnnotations(t, c, ns, dv.Name, "Succeeded", "false")
	if got := volumeFiles(t, c, ns, dv.Name); len(got) != 1 || got[0] != "disk.img" {
		t.Errorf("the volume holds %v, want disk.img", got)
	}

	checkTokenRBAC(t, f, ns)
	framework.WaitVMI(t, c, ns, vmi.Name, 2*time.Minute, "booted from the uploaded disk", framework.AgentConnected)
}

func waitDVPhase(t *testing.T, c client.Client, dv *cdiv1.DataVolume, phase cdiv1.DataVolumePhase) {
	t.Helper()
	framework.Eventually(t, 2*time.Minute, "DataVolume "+dv.Name+" "+string(phase), func() error {
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(dv), dv); err != nil {
			return err
		}
		if dv.Status.Phase == cdiv1.Failed && phase != cdiv1.Failed {
			t.Fatalf("DataVolume %s failed: %+v", dv.Name, dv.Status)
		}
		if dv.Status.Phase != phase {
			return fmt.Errorf("phase %q", dv.Status.Phase)
		}
		return nil
	})
}

func uploadToken(t *testing.T, c client.Client, ns, pvc string) string {
	t.Helper()
	tr := &uploadv1beta1.UploadTokenRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "token"}, Spec: uploadv1beta1.UploadTokenRequestSpec{PvcName: pvc}}
	if err := c.Create(context.Background(), tr); err != nil {
		t.Fatal(err)
	}
	if strings.Count(tr.Status.Token, ".") != 2 {
		t.Fatalf("the token %q is not a JWT", tr.Status.Token)
	}
	return tr.Status.Token
}

// volumeFiles lists the files on the PVC's volume (a directory on this node).
func volumeFiles(t *testing.T, c client.Client, ns, pvc string) []string {
	t.Helper()
	entries, err := os.ReadDir(volumeDir(t, c, ns, pvc))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// volumeDir is where this machine holds the PVC's volume (in its node's
// directory).
func volumeDir(t *testing.T, c client.Client, ns, pvc string) string {
	t.Helper()
	claim := &corev1.PersistentVolumeClaim{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: pvc}, claim); err != nil {
		t.Fatal(err)
	}
	pv := &corev1.PersistentVolume{}
	if err := c.Get(context.Background(), client.ObjectKey{Name: claim.Spec.VolumeName}, pv); err != nil {
		t.Fatal(err)
	}
	return framework.VolumeHostDir(pv)
}

type proxyClient struct {
	url string
	hc  *http.Client
}

// uploadProxy reaches the upload proxy Service, trusting the CA bundle the
// operator publishes (and nothing else).
func uploadProxy(t *testing.T, _ *framework.Framework, c client.Client) *proxyClient {
	t.Helper()
	svc := &corev1.Service{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ctrlconfig.Namespace, Name: ctrlconfig.UploadProxyService}, svc); err != nil {
		t.Fatal(err)
	}
	ca, err := kube.TekvirtCA(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	tr := &http.Transport{TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool,
		ServerName: ctrlconfig.UploadProxyService + "." + ctrlconfig.Namespace + ".svc"}}
	return &proxyClient{url: "https://" + net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(int(svc.Spec.Ports[0].Port))), hc: &http.Client{Transport: tr, Timeout: time.Minute}}
}

func (p *proxyClient) post(t *testing.T, path, token, contentType string, body io.Reader) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, p.url+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := p.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	msg, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(msg))
}

// checkTokenRBAC: the built-in edit role may request upload tokens (our
// role aggregates into it), view may not.
func checkTokenRBAC(t *testing.T, f *framework.Framework, ns string) {
	t.Helper()
	ctx := context.Background()
	for user, role := range map[string]string{"e2e-editor": "edit", "e2e-viewer": "view"} {
		rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role},
			Subjects: []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: user}}}
		if _, err := f.Kube.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	s := runtime.NewScheme()
	if err := uploadv1beta1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	as := func(user string) error {
		cfg := rest.CopyConfig(f.Config)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
		c, err := client.New(cfg, client.Options{Scheme: s})
		if err != nil {
			t.Fatal(err)
		}
		return c.Create(ctx, &uploadv1beta1.UploadTokenRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user},
			Spec: uploadv1beta1.UploadTokenRequestSpec{PvcName: "by-form"}})
	}
	framework.Eventually(t, 30*time.Second, "an editor may request an upload token", func() error { return as("e2e-editor") })
	if err := as("e2e-viewer"); err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Errorf("a viewer requested an upload token: err = %v", err)
	}
}

// TestCrossNamespaceClone: a pvc source in another namespace clones through
// a sender in the source namespace and the upload proxy; the clone is the
// source's disk byte for byte, the sender is gone afterwards, and a user
// without datavolumes/source in the source namespace is refused.
func TestCrossNamespaceClone(t *testing.T) {
	t.Parallel() // mostly waiting on its own VMs and runs: see "Parallel" in doc.go
	f := framework.New(t)
	c := f.VMClient(t)
	srcNS, dstNS := f.Namespace(t), f.Namespace(t)
	ctx := context.Background()
	size := corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("128Mi")}}
	src := &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: srcNS, Name: "golden"},
		Spec: cdiv1.DataVolumeSpec{Source: &cdiv1.DataVolumeSource{HTTP: &cdiv1.DataVolumeSourceHTTP{URL: serveGuest(t, f) + "/guest.qcow2.xz"}},
			Storage: &cdiv1.StorageSpec{Resources: size}}}
	if err := c.Create(ctx, src); err != nil {
		t.Fatal(err)
	}
	waitDVPhase(t, c, src, cdiv1.Succeeded)

	clone := &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: dstNS, Name: "mine"},
		Spec: cdiv1.DataVolumeSpec{Source: &cdiv1.DataVolumeSource{PVC: &cdiv1.DataVolumeSourcePVC{Namespace: srcNS, Name: src.Name}},
			Storage: &cdiv1.StorageSpec{Resources: size}}}
	denyClone(t, f, clone.DeepCopy())
	start := time.Now()
	if err := c.Create(ctx, clone); err != nil {
		t.Fatal(err)
	}
	waitDVPhase(t, c, clone, cdiv1.Succeeded)
	t.Logf("cross-namespace clone create -> Succeeded: %s", time.Since(start).Round(100*time.Millisecond))
	a, b := volumeDisk(t, c, srcNS, src.Name), volumeDisk(t, c, dstNS, clone.Name)
	if !bytes.Equal(a, b) || len(a) == 0 {
		t.Errorf("the clone (%d bytes) differs from the source (%d bytes)", len(b), len(a))
	}
	// A source volume without a disk fails the clone at once, naming it.
	empty := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: srcNS, Name: "empty"},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, Resources: size}}
	if err := c.Create(ctx, empty); err != nil {
		t.Fatal(err)
	}
	bad := &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: dstNS, Name: "from-empty"},
		Spec: cdiv1.DataVolumeSpec{Source: &cdiv1.DataVolumeSource{PVC: &cdiv1.DataVolumeSourcePVC{Namespace: srcNS, Name: empty.Name}},
			Storage: &cdiv1.StorageSpec{Resources: size}}}
	if err := c.Create(ctx, bad); err != nil {
		t.Fatal(err)
	}
	waitDVPhase(t, c, bad, cdiv1.Failed)
	if msg := readyMessage(bad); !strings.Contains(msg, "sending PVC "+srcNS+"/empty failed") || bad.Status.RestartCount != 0 {
		t.Errorf("clone of an empty volume: restarts %d, message %q", bad.Status.RestartCount, msg)
	}
	senders := func(target string) func() error {
		return func() error {
			runs, err := f.Tekton.TektonV1().TaskRuns(srcNS).List(ctx, metav1.ListOptions{
				LabelSelector: datavolume.CloneTargetNamespaceLabel + "=" + dstNS + "," + datavolume.CloneTargetNameLabel + "=" + target})
			if err != nil {
				return err
			}
			if len(runs.Items) > 0 {
				return fmt.Errorf("sender %s of %s still there", runs.Items[0].Name, target)
			}
			return nil
		}
	}
	framework.Eventually(t, 30*time.Second, "the succeeded clone's sender removed", senders(clone.Name))
	// The failed clone's sender stays for its log until the DataVolume goes.
	if senders(bad.Name)() == nil {
		t.Error("the failed clone's sender is gone while its DataVolume is there")
	}
	tokenSecret := checkSenderToken(t, f, srcNS, dstNS, bad.Name)
	if err := c.Delete(ctx, bad); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, "the deleted DataVolume's sender removed", senders(bad.Name))
	framework.Eventually(t, 30*time.Second, "the deleted sender's token Secret removed", func() error {
		_, err := f.Kube.CoreV1().Secrets(srcNS).Get(ctx, tokenSecret, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (%w)", err)
	})
}

// checkSenderToken: a clone sender's token is in a Secret of its own,
// owned by the run, and nowhere in the run itself. It returns the Secret's name.
func checkSenderToken(t *testing.T, f *framework.Framework, srcNS, dstNS, target string) string {
	t.Helper()
	ctx := context.Background()
	runs, err := f.Tekton.TektonV1().TaskRuns(srcNS).List(ctx, metav1.ListOptions{
		LabelSelector: datavolume.CloneTargetNamespaceLabel + "=" + dstNS + "," + datavolume.CloneTargetNameLabel + "=" + target})
	if err != nil || len(runs.Items) != 1 {
		t.Fatalf("the sender of %s: %d runs, %v", target, len(runs.Items), err)
	}
	run := runs.Items[0]
	secret, err := f.Kube.CoreV1().Secrets(srcNS).Get(ctx, run.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the sender's token Secret: %v", err)
	}
	token := secret.Data["token"]
	if strings.Count(string(token), ".") != 2 || len(secret.OwnerReferences) != 1 || secret.OwnerReferences[0].UID != run.UID {
		t.Errorf("token Secret %s: a %d-byte token, owners %+v", secret.Name, len(token), secret.OwnerReferences)
	}
	spec, _ := json.Marshal(run)
	if len(token) > 0 && bytes.Contains(spec, token) {
		t.Errorf("the sender's TaskRun %s holds its token", run.Name)
	}
	return secret.Name
}

// volumeDisk reads disk.img of the PVC's volume.
func volumeDisk(t *testing.T, c client.Client, ns, pvc string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(volumeDir(t, c, ns, pvc), "disk.img"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func readyMessage(dv *cdiv1.DataVolume) string {
	for _, c := range dv.Status.Conditions {
		if c.Type == cdiv1.DataVolumeReady {
			return c.Message
		}
	}
	return ""
}

// claimPodAnnotations waits for the DataVolume's claim to carry CDI's
// annotations of its Pod's phase and readiness.
func claimPodAnnotations(t *testing.T, c client.Client, ns, name, phase, ready string) {
	t.Helper()
	framework.Eventually(t, 30*time.Second, "the claim's pod phase "+phase+", ready "+ready, func() error {
		pvc := &corev1.PersistentVolumeClaim{}
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, pvc); err != nil {
			return err
		}
		if pvc.Annotations["cdi.kubevirt.io/storage.pod.phase"] != phase || pvc.Annotations["cdi.kubevirt.io/storage.pod.ready"] != ready {
			return fmt.Errorf("annotations %v", pvc.Annotations)
		}
		return nil
	})
}
