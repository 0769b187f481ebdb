package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	pipelinev1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/tekvirt/tekvirt/controllers/claimimport"
	"github.com/tekvirt/tekvirt/controllers/hostpath"
	"github.com/tekvirt/tekvirt/e2e/framework"
)

// serveGuest serves the guest's disk files over HTTP on the node address.
func serveGuest(t *testing.T, f *framework.Framework) string {
	t.Helper()
	return f.ServeDir(t, f.GuestDir())
}

func importTaskRun(pvc string, params map[string]string) *pipelinev1.TaskRun {
	tr := &pipelinev1.TaskRun{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "import-disk-", Namespace: framework.CatalogNamespace},
		Spec: pipelinev1.TaskRunSpec{
			TaskRef:            &pipelinev1.TaskRef{Name: "import-disk"},
			ServiceAccountName: "import-disk-task",
			Workspaces: []pipelinev1.WorkspaceBinding{{Name: "data",
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: pvc}}},
		},
	}
	for k, v := range params {
		tr.Spec.Params = append(tr.Spec.Params, pipelinev1.Param{Name: k, Value: *pipelinev1.NewStructuredValues(v)})
	}
	return tr
}

// TestImportDiskThenBoot imports the guest's qcow2.xz over HTTP into a PVC
// with the import-disk task, checks that bad input fails naming the cause
// and leaves the disk, clones the PVC with clone-disk and boots a VM from
// the clone.
func TestImportDiskThenBoot(t *testing.T) {
	t.Parallel() // mostly waiting on Pods and runs: see "Parallel" in doc.go
	f := framework.New(t)
	c := f.VMClient(t)
	ctx := context.Background()
	ns := framework.CatalogNamespace
	base := serveGuest(t, f)
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "e2e-import-"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("256Mi")}},
		},
	}
	if err := c.Create(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(ctx, pvc) })
	xzFile, err := os.ReadFile(filepath.Join(f.GuestDir(), "guest.qcow2.xz"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(xzFile)
	r := framework.NewTaskRunRunner(t, f, importTaskRun(pvc.Name, map[string]string{
		"url": base + "/guest.qcow2.xz", "checksum": "sha256:" + hex.EncodeToString(sum[:]), "capacity": "256Mi",
	})).CreateTaskRun().ExpectSuccess().ExpectLogs(`progress: 100\.00%`, `imported qcow2 image \(xz\)`)
	t.Logf("import-disk of %d bytes of qcow2.xz: %s", len(xzFile), r.Elapsed.Round(100*time.Millisecond))
	if res := r.Results(); res["format"] != "qcow2" || res["virtualSize"] != "67108864" {
		t.Errorf("results %v", res)
	}
	broken := serveBroken(t, f, xzFile)
	for _, bad := range []struct {
		params map[string]string
		want   string
	}{
		{map[string]string{"url": base + "/guest.qcow2.xz", "checksum": "sha256:" + strings.Repeat("ab", 32)}, "checksum mismatch"},
		{map[string]string{"url": base + "/no-such-image.qcow2"}, "source not found"},
		{map[string]string{"url": base + "/guest.qcow2", "capacity": "32Mi"}, "image larger than the target"},
		{map[string]string{"url": broken + "/truncated.qcow2.xz"}, "xz stream truncated or corrupt"},
		{map[string]string{"url": broken + "/reset.qcow2.xz"}, "giving up after 5 attempts"},
		{map[string]string{"url": broken + "/corrupt.qcow2"}, "qcow2 header"},
		{map[string]string{"url": broken + "/backed.qcow2"}, "backing file"},
	} {
		framework.NewTaskRunRunner(t, f, importTaskRun(pvc.Name, bad.params)).CreateTaskRun().ExpectFailure(bad.want)
	}
	// The disk from the good import survived the failed ones: a clone of it boots.
	// On the source's node: the default class binds at once, and one Pod
	// mounts both node-local volumes.
	src := &corev1.PersistentVolume{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(pvc), pvc); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, src); err != nil {
		t.Fatal(err)
	}
	clone := pvc.DeepCopy()
	clone.ObjectMeta = metav1.ObjectMeta{Namespace: ns, GenerateName: "e2e-clone-",
		Annotations: map[string]string{hostpath.AnnProvisionOnNode: hostpath.VolumeNode(src)}}
	clone.Spec.VolumeName = ""
	if err := c.Create(ctx, clone); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(ctx, clone) })
	cr := framework.NewTaskRunRunner(t, f, &pipelinev1.TaskRun{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "clone-disk-", Namespace: ns},
		Spec: pipelinev1.TaskRunSpec{
			TaskRef:            &pipelinev1.TaskRef{Name: "clone-disk"},
			ServiceAccountName: "clone-disk-task",
			Workspaces: []pipelinev1.WorkspaceBinding{
				{Name: "source", PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: pvc.Name}},
				{Name: "target", PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: clone.Name}},
			},
		},
	}).CreateTaskRun().ExpectSuccess()
	t.Logf("clone-disk: %s by %s", cr.Elapsed.Round(100*time.Millisecond), cr.Results()["method"])
	vmi := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "e2e-imported-"}, Spec: framework.GuestVMI(framework.GuestImage, "imported")}
	vmi.Spec.Volumes[0] = v1.Volume{Name: "containerdisk", VolumeSource: v1.VolumeSource{DataVolume: &v1.DataVolumeSource{Name: clone.Name}}}
	if err := c.Create(ctx, vmi); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(ctx, vmi) })
	framework.WaitVMI(t, c, ns, vmi.Name, 2*time.Minute, "booted from the imported disk", framework.AgentConnected)
	if err := c.Delete(ctx, vmi); err != nil {
		t.Fatal(err)
	}
	framework.WaitGone(t, c, vmi, time.Minute)
}

// TestDataVolumeImport: a CDI DataVolume with an http source is imported
// by a TaskRun into its PVC; a VM's dataVolumeTemplate clones it (a user
// without datavolumes/source is refused) and the VM boots from it once the
// clone succeeded; an unsupported source is rejected by name; a wrong
// checksum fails with no retry.
func TestDataVolumeImport(t *testing.T) {
	t.Parallel() // mostly waiting on its own VMs and runs: see "Parallel" in doc.go
	f := framework.New(t)
	c := f.VMClient(t)
	ns := f.Namespace(t)
	ctx := context.Background()
	base := serveGuest(t, f)
	dv := func(name string, src cdiv1.DataVolumeSource) *cdiv1.DataVolume {
		return &cdiv1.DataVolume{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: cdiv1.DataVolumeSpec{Source: &src, Storage: &cdiv1.StorageSpec{
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("128Mi")}}}},
		}
	}
	good := dv("guest", cdiv1.DataVolumeSource{HTTP: &cdiv1.DataVolumeSourceHTTP{URL: base + "/guest.qcow2.xz"}})
	start := time.Now()
	if err := c.Create(ctx, good); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 2*time.Minute, "DataVolume Succeeded", func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(good), good); err != nil {
			return err
		}
		if good.Status.Phase == cdiv1.Failed {
			t.Fatalf("DataVolume failed: %+v", good.Status)
		}
		if good.Status.Phase != cdiv1.Succeeded || good.Status.Progress != "100.0%" {
			return fmt.Errorf("phase %q progress %q", good.Status.Phase, good.Status.Progress)
		}
		return nil
	})
	t.Logf("DataVolume create -> Succeeded: %s", time.Since(start).Round(100*time.Millisecond))
	checkLiveProgress(t, f, c, dv("slow", cdiv1.DataVolumeSource{HTTP: &cdiv1.DataVolumeSourceHTTP{URL: serveSlowly(t, f) + "/guest.qcow2.xz"}}))

	unsupported := dv("s3", cdiv1.DataVolumeSource{S3: &cdiv1.DataVolumeSourceS3{URL: "s3://bucket/disk"}})
	if err := c.Create(ctx, unsupported); err == nil || !strings.Contains(err.Error(), "spec.source.s3 is not supported") {
		t.Errorf("s3 source: err = %v", err)
	}
	bad := dv("bad-sum", cdiv1.DataVolumeSource{HTTP: &cdiv1.DataVolumeSourceHTTP{URL: base + "/guest.qcow2.xz", Checksum: "sha256:" + strings.Repeat("ab", 32)}})
	if err := c.Create(ctx, bad); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 2*time.Minute, "DataVolume with a wrong checksum Failed", func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(bad), bad); err != nil {
			return err
		}
		if bad.Status.Phase != cdiv1.Failed {
			return fmt.Errorf("phase %q", bad.Status.Phase)
		}
		return nil
	})
	if bad.Status.RestartCount != 0 {
		t.Errorf("a checksum failure was retried %d times", bad.Status.RestartCount)
	}
	if msg := readyMessage(bad); !strings.Contains(msg, "sha256 of the image is") {
		t.Errorf("the checksum failure's message does not name it: %q", msg)
	}
	// Events as CDI's: succeeded; failed naming why (the phases between
	// may pass faster than a reconcile sees them).
	framework.Eventually(t, 30*time.Second, "the DataVolumes' events", func() error {
		if err := hasEvents(f, good, "ImportSucceeded"); err != nil {
			return err
		}
		seen, err := objectEvents(f, bad)
		if err != nil {
			return err
		}
		if !strings.Contains(seen["ImportFailed"], "sha256 of the image is") {
			return fmt.Errorf("no ImportFailed event naming the checksum among %v", seen)
		}
		return nil
	})

	// A clone of it (pvc source), by a user allowed to, and not by one who is
	// not; the allowed one as a VM's dataVolumeTemplate, which the VM waits for.
	clone := dv("guest-clone", cdiv1.DataVolumeSource{PVC: &cdiv1.DataVolumeSourcePVC{Name: good.Name}})
	denyClone(t, f, clone.DeepCopy())
	vm := framework.GuestVM(ns, "from-dv", framework.GuestImage, v1.RunStrategyAlways)
	vm.Spec.DataVolumeTemplates = []v1.DataVolumeTemplateSpec{{ObjectMeta: metav1.ObjectMeta{Name: clone.Name}, Spec: clone.Spec}}
	vm.Spec.Template.Spec.Volumes[0] = v1.Volume{Name: "containerdisk", VolumeSource: v1.VolumeSource{DataVolume: &v1.DataVolumeSource{Name: clone.Name}}}
	if err := c.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
	vmi := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: vm.Name}}
	framework.WaitVMI(t, c, ns, vmi.Name, 2*time.Minute, "booted from the DataVolume", framework.AgentConnected)
	if err := c.Get(ctx, client.ObjectKeyFromObject(clone), clone); err != nil || clone.Status.Phase != cdiv1.Succeeded || !metav1.IsControlledBy(clone, vm) {
		t.Errorf("the VM's DataVolume: phase %q, owned by the VM %v, %v", clone.Status.Phase, metav1.IsControlledBy(clone, vm), err)
	}
}

// denyClone creates dv as a user who may create DataVolumes in its
// namespace but not clone from it, and expects the webhook's refusal.
func denyClone(t *testing.T, f *framework.Framework, dv *cdiv1.DataVolume) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: dv.Namespace, Name: "dv-creator"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"cdi.kubevirt.io"}, Resources: []string{"datavolumes"}, Verbs: []string{"create"}}}}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: dv.Namespace, Name: "dv-creator"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: "e2e-no-clone"}}}
	if _, err := f.Kube.RbacV1().Roles(dv.Namespace).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Kube.RbacV1().RoleBindings(dv.Namespace).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg := rest.CopyConfig(f.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "e2e-no-clone"}
	s := runtime.NewScheme()
	if err := cdiv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	dv.Name = "not-allowed"
	err = c.Create(ctx, dv)
	if err == nil || !strings.Contains(err.Error(), "e2e-no-clone may not clone PVC") {
		t.Errorf("clone by a user without datavolumes/source: err = %v", err)
	}
}

// serveBroken serves data cut in half (/truncated.qcow2.xz), a qcow2 header
// of garbage (/corrupt.qcow2), a qcow2 with a backing file (/backed.qcow2),
// and data that breaks off after 1 MB with the connection reset, the server
// answering 502 from then on (/reset.qcow2.xz).
func serveBroken(t *testing.T, f *framework.Framework, data []byte) string {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(f.NodeIP(t), "0"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	base, backed := filepath.Join(dir, "base.raw"), filepath.Join(dir, "backed.qcow2")
	if err := os.WriteFile(base, make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("qemu-img", "create", "-q", "-f", "qcow2", "-b", base, "-F", "raw", backed, "64M").CombinedOutput(); err != nil {
		t.Fatalf("qemu-img create: %v: %s", err, out)
	}
	backedData, err := os.ReadFile(backed)
	if err != nil {
		t.Fatal(err)
	}
	var resets atomic.Int32
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/truncated.qcow2.xz":
			_, _ = w.Write(data[:len(data)/2])
		case r.URL.Path == "/corrupt.qcow2":
			_, _ = w.Write(append([]byte("QFI\xfb"), bytes.Repeat([]byte{0xff}, 4096)...))
		case r.URL.Path == "/backed.qcow2":
			_, _ = w.Write(backedData)
		case resets.Add(1) == 1:
			w.Header().Set("Accept-Ranges", "bytes")
			w.Header().Set("Content-Length", strconv.Itoa(len(data)))
			_, _ = w.Write(data[:1<<20])
			w.(http.Flusher).Flush()
			if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
				_ = conn.Close()
			}
		default:
			http.Error(w, "down", http.StatusBadGateway)
		}
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + l.Addr().String()
}

// serveSlowly serves the guest's files at about 2 MB/s, so that an import
// takes several seconds.
func serveSlowly(t *testing.T, f *framework.Framework) string {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(f.NodeIP(t), "0"))
	if err != nil {
		t.Fatal(err)
	}
	dir := f.GuestDir()
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, err := os.ReadFile(filepath.Join(dir, filepath.Base(r.URL.Path)))
		if err != nil {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Length", fmt.Sprint(len(data)))
		for len(data) > 0 {
			n := min(len(data), 200_000)
			if _, err := w.Write(data[:n]); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			data = data[n:]
			time.Sleep(100 * time.Millisecond)
		}
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + l.Addr().String()
}

// checkLiveProgress imports dv and expects status.progress to show a
// percentage between 0 and 100 while it runs.
func checkLiveProgress(t *testing.T, f *framework.Framework, c client.Client, dv *cdiv1.DataVolume) {
	t.Helper()
	ctx := context.Background()
	if err := c.Create(ctx, dv); err != nil {
		t.Fatal(err)
	}
	var seen []string
	framework.Eventually(t, 2*time.Minute, "slow DataVolume Succeeded", func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(dv), dv); err != nil {
			return err
		}
		if p := string(dv.Status.Progress); p != "" && (len(seen) == 0 || seen[len(seen)-1] != p) {
			seen = append(seen, p)
		}
		if dv.Status.Phase != cdiv1.Succeeded {
			return fmt.Errorf("phase %q progress %q", dv.Status.Phase, dv.Status.Progress)
		}
		return nil
	})
	partial := false
	for _, p := range seen {
		partial = partial || (strings.HasSuffix(p, "%") && p != "100.0%" && p != "0.00%")
	}
	if !partial {
		t.Errorf("no progress between 0 and 100%% seen while importing: %v", seen)
	}
	t.Logf("progress seen: %v", seen)
}

// TestImportAnnotatedClaim: CDI's older path - a PVC annotated
// cdi.kubevirt.io/storage.import.endpoint - is imported into and reports
// the import in CDI's annotations (pod phase Succeeded, the importer's
// name, the Running condition), and a VM boots from it; a source tekvirt
// does not import is a failed import naming the annotation.
func TestImportAnnotatedClaim(t *testing.T) {
	t.Parallel() // mostly waiting on the run and the guest
	f := framework.New(t)
	c := f.VMClient(t)
	ctx := context.Background()
	ns := f.Namespace(t)
	base := serveGuest(t, f)
	claim := func(name string, ann map[string]string) *corev1.PersistentVolumeClaim {
		pvc := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: ann},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("256Mi")}},
			},
		}
		if err := c.Create(ctx, pvc); err != nil {
			t.Fatal(err)
		}
		return pvc
	}
	waitPhase := func(pvc *corev1.PersistentVolumeClaim, phase corev1.PodPhase) {
		t.Helper()
		framework.Eventually(t, 3*time.Minute, "PVC "+pvc.Name+" import "+string(phase), func() error {
			if err := c.Get(ctx, client.ObjectKeyFromObject(pvc), pvc); err != nil {
				return err
			}
			if got := pvc.Annotations[claimimport.AnnPodPhase]; got != string(phase) {
				return fmt.Errorf("%s %q, annotations %v", claimimport.AnnPodPhase, got, pvc.Annotations)
			}
			return nil
		})
	}
	good := claim("annotated", map[string]string{claimimport.AnnEndpoint: base + "/guest.qcow2.xz"})
	bad := claim("annotated-s3", map[string]string{claimimport.AnnEndpoint: "s3://bucket/disk", claimimport.AnnSource: "s3"})
	waitPhase(good, corev1.PodSucceeded)
	if a := good.Annotations; a[claimimport.AnnImportPodName] == "" || a[claimimport.AnnRunning] != "false" || a[claimimport.AnnRunningReason] != "Completed" {
		t.Errorf("annotations after the import: %v", a)
	}
	waitPhase(bad, corev1.PodFailed)
	if msg := bad.Annotations[claimimport.AnnRunningMessage]; !strings.Contains(msg, claimimport.AnnSource) {
		t.Errorf("a refused source: message %q, want it to name %s", msg, claimimport.AnnSource)
	}
	vmi := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "from-annotated"}, Spec: framework.GuestVMI(framework.GuestImage, "from-annotated")}
	vmi.Spec.Volumes[0].VolumeSource = v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{
		PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: good.Name}}}
	if err := c.Create(ctx, vmi); err != nil {
		t.Fatal(err)
	}
	framework.WaitVMI(t, c, ns, vmi.Name, 3*time.Minute, "running from the imported claim", framework.AgentConnected)
}
