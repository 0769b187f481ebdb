package diskuploader

import (
	"bytes"
	"context"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	v1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/tekvirt/tekvirt/images"
)

func vm(name string, vols ...v1.Volume) *v1.VirtualMachine {
	return &v1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec: v1.VirtualMachineSpec{Template: &v1.VirtualMachineInstanceTemplateSpec{Spec: v1.VirtualMachineInstanceSpec{Volumes: vols}}}}
}

func dvVolume(claim string) v1.Volume {
	return v1.Volume{Name: "root", VolumeSource: v1.VolumeSource{DataVolume: &v1.DataVolumeSource{Name: claim}}}
}

func vmi(name, claim string, phase v1.VirtualMachineInstancePhase) *v1.VirtualMachineInstance {
	return &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec: v1.VirtualMachineInstanceSpec{Volumes: []v1.Volume{{Name: "d", VolumeSource: v1.VolumeSource{
			PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}}},
		Status: v1.VirtualMachineInstanceStatus{Phase: phase}}
}

func fakeClient(t *testing.T, objs ...client.Object) client.Client {
	t.Helper()
	s := runtime.NewScheme()
	if err := corev1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := v1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build()
}

func TestRunRefusesBadParamsAndBusySources(t *testing.T) {
	claim := func(n string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: n}}
	}
	c := fakeClient(t, vm("stopped", dvVolume("stopped-root")), vm("running", dvVolume("running-root")),
		vmi("running", "running-root", v1.Running), vmi("old", "done-disk", v1.Succeeded),
		claim("stopped-root"), claim("running-root"), claim("done-disk"), claim("free"))
	good := Params{Kind: "vm", Name: "stopped", Volume: "stopped-root", Destination: "reg.example/os:1", PushTimeout: "120", Namespace: "ns", Dir: t.TempDir()}
	for name, tc := range map[string]struct {
		change func(*Params)
		want   string
	}{
		"unknown kind":                {func(p *Params) { p.Kind = "snapshot" }, `EXPORT_SOURCE_KIND "snapshot" is not vm or pvc`},
		"no destination":              {func(p *Params) { p.Destination = "" }, "param IMAGE_DESTINATION is required"},
		"no volume":                   {func(p *Params) { p.Volume = "" }, "param VOLUME_NAME is required"},
		"secret of another namespace": {func(p *Params) { p.SecretName = "victim/login" }, `SECRET_NAME "victim/login" is not the name of an object in the TaskRun's namespace ns`},
		"CA of another namespace":     {func(p *Params) { p.CertConfigMap = "../victim/ca" }, `CERT_CONFIGMAP "../victim/ca" is not the name`},
		"claim of another namespace":  {func(p *Params) { p.Volume = "victim/disk" }, `VOLUME_NAME "victim/disk" is not the name`},
		"timeout not a number":        {func(p *Params) { p.PushTimeout = "2h" }, `PUSH_TIMEOUT "2h" is not a positive number of minutes`},
		"zero timeout":                {func(p *Params) { p.PushTimeout = "0" }, `PUSH_TIMEOUT "0"`},
		"missing VM":                  {func(p *Params) { p.Name = "gone" }, "EXPORT_SOURCE_NAME: VM ns/gone"},
		"claim not the VM's":          {func(p *Params) { p.Volume = "free" }, `VOLUME_NAME: VM ns/stopped has no volume on claim "free" (its claims: stopped-root)`},
		"running VM":                  {func(p *Params) { p.Name, p.Volume = "running", "running-root" }, "claim running-root is in use by VMI ns/running (phase Running): stop its VM"},
		"PVC of a running VMI":        {func(p *Params) { p.Kind, p.Name, p.Volume = "pvc", "running-root", "running-root" }, "in use by VMI ns/running"},
		"missing PVC":                 {func(p *Params) { p.Kind, p.Name, p.Volume = "pvc", "nope", "nope" }, "EXPORT_SOURCE_NAME: PVC ns/nope"},
		"PVC and another claim":       {func(p *Params) { p.Kind, p.Name, p.Volume = "pvc", "free", "stopped-root" }, `VOLUME_NAME "stopped-root" is not the PVC EXPORT_SOURCE_NAME "free" names`},
		"no disk on the claim":        {func(p *Params) {}, "claim ns/stopped-root holds no disk.img"},
		"missing secret":              {func(p *Params) { p.Kind, p.Name, p.Volume, p.SecretName = "pvc", "done-disk", "done-disk", "creds" }, "SECRET_NAME: credentials secret ns/creds"},
	} {
		p := good
		tc.change(&p)
		if name == "missing secret" {
			if err := os.WriteFile(filepath.Join(p.Dir, DiskFile), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		_, err := Run(context.Background(), c, p, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
		os.Remove(filepath.Join(p.Dir, DiskFile))
	}
}

// TestRunPushesTheDisk: a stopped VM's disk reaches the registry whole, and
// the digest result is the pushed manifest's.
func TestRunPushesTheDisk(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	dir := t.TempDir()
	want := bytes.Repeat([]byte("disk"), 1<<18)
	if err := os.WriteFile(filepath.Join(dir, DiskFile), want, 0o644); err != nil {
		t.Fatal(err)
	}
	c := fakeClient(t, vm("golden", dvVolume("golden-root")))
	var log bytes.Buffer
	res, err := Run(context.Background(), c, Params{Kind: "VM", Name: "golden", Volume: "golden-root", Destination: "docker://" + host + "/os/golden:v1",
		PushTimeout: "1", Namespace: "ns", Dir: dir}, &log)
	if err != nil {
		t.Fatal(err)
	}
	src := &images.RegistrySource{Registry: images.Registry{Ref: host + "/os/golden:v1"}}
	rc, _, err := src.Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	got, _ := io.ReadAll(rc)
	if !bytes.Equal(got, want) || src.Digest != res.Digest {
		t.Errorf("read back %d bytes with digest %s; pushed %d, result %s", len(got), src.Digest, len(want), res.Digest)
	}
	if !strings.Contains(log.String(), "pushing disk.img of vm ns/golden (claim golden-root, 1Mi)") || !strings.Contains(log.String(), "done: 100.0%") {
		t.Errorf("log:\n%s", log.String())
	}
}
