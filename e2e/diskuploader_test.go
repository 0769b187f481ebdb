package e2e

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/tekvirt/tekvirt/e2e/framework"
	"github.com/tekvirt/tekvirt/e2e/ocibuild"
)

// TestDiskUploaderTask: disk-uploader pushes a stopped VM's disk to a
// private TLS registry as a containerDisk (the step as user 65532 under the
// restricted profile), its digest result is the registry's, and a VM boots
// from a DataVolume imported from the pushed image. Wrong credentials fail
// naming the 401 and push nothing; a running VM's disk is refused.
func TestDiskUploaderTask(t *testing.T) {
	t.Parallel() // mostly waiting on Pods and runs: see "Parallel" in doc.go
	f := framework.New(t)
	c := f.VMClient(t)
	ctx := context.Background()
	ns := framework.CatalogNamespace // where the task and its ServiceAccount are
	id := rand.String(5)
	reg := startTLSRegistry(t, f)
	reg.push(t, "os/source:"+id, map[string]ocibuild.File{"/disk/guest.qcow2": {Source: filepath.Join(f.GuestDir(), "guest.qcow2"), Mode: 0o644}})
	caName, good, bad := "uploader-ca-"+id, "uploader-login-"+id, "uploader-wrong-"+id
	objs := []client.Object{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: caName}, Data: map[string]string{"ca.crt": string(reg.ca)}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: good}, StringData: map[string]string{"accessKeyId": registryUser, "secretKey": registryPass}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: bad}, StringData: map[string]string{"accessKeyId": registryUser, "secretKey": "wrong"}},
	}
	size := corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("128Mi")}}
	registryDV := func(name, url string, secret *string) *cdiv1.DataVolume {
		return &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: cdiv1.DataVolumeSpec{
			Source:  &cdiv1.DataVolumeSource{Registry: &cdiv1.DataVolumeSourceRegistry{URL: &url, CertConfigMap: &caName, SecretRef: secret}},
			Storage: &cdiv1.StorageSpec{Resources: size}}}
	}
	vmOn := func(name, claim string, rs v1.VirtualMachineRunStrategy) *v1.VirtualMachine {
		vm := framework.GuestVM(ns, name, framework.GuestImage, rs)
		vm.Spec.Template.Spec.Volumes[0] = v1.Volume{Name: "containerdisk", VolumeSource: v1.VolumeSource{DataVolume: &v1.DataVolumeSource{Name: claim}}}
		return vm
	}
	source := registryDV("uploader-src-"+id, "docker://"+reg.host+"/os/source:"+id, nil)
	stopped := vmOn("uploader-src-"+id, source.Name, v1.RunStrategyHalted)
	objs = append(objs, source, stopped)
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Delete(context.Background(), o) })
	}
	waitDVPhase(t, c, source, cdiv1.Succeeded)

	dest := reg.host + "/private/uploaded:" + id
	upload := func(vm, claim, secret string) *framework.TaskRunRunner {
		return framework.NewTaskRunRunner(t, f, framework.CatalogTaskRun("disk-uploader", map[string]any{
			"EXPORT_SOURCE_KIND": "vm", "EXPORT_SOURCE_NAME": vm, "VOLUME_NAME": claim,
			"IMAGE_DESTINATION": dest, "SECRET_NAME": secret, "CERT_CONFIGMAP": caName, "PUSH_TIMEOUT": "5",
		})).WithTimeout(5 * time.Minute).CreateTaskRun()
	}
	ref, err := name.ParseReference(dest)
	if err != nil {
		t.Fatal(err)
	}
	login := remote.WithAuth(&authn.Basic{Username: registryUser, Password: registryPass})

	upload(stopped.Name, source.Name, bad).ExpectFailure(`pushing to .*private/uploaded.*\(401\)`)
	if _, err := remote.Head(ref, remote.WithTransport(reg.tr), login); err == nil {
		t.Fatal("a push with wrong credentials left an image")
	}

	start := time.Now()
	run := upload(stopped.Name, source.Name, good).ExpectSuccess().ExpectLogs(`pushing disk\.img of vm `, `done: 100\.0%`)
	t.Logf("disk-uploader TaskRun (128Mi disk): %s", time.Since(start).Round(100*time.Millisecond))
	desc, err := remote.Head(ref, remote.WithTransport(reg.tr), login)
	if err != nil {
		t.Fatal(err)
	}
	if got := run.Results()["digest"]; got != desc.Digest.String() {
		t.Errorf("digest result %q, the registry has %s", got, desc.Digest)
	}

	secret := good
	pulled := registryDV("uploader-pulled-"+id, "docker://"+dest, &secret)
	booted := vmOn("uploader-booted-"+id, pulled.Name, v1.RunStrategyAlways)
	for _, o := range []client.Object{pulled, booted} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Delete(context.Background(), o) })
	}
	framework.WaitVMI(t, c, ns, booted.Name, 4*time.Minute, "booted from the pushed image", framework.AgentConnected)

	upload(booted.Name, pulled.Name, good).ExpectFailure("claim " + pulled.Name + " is in use by VMI .*stop its VM")
}
