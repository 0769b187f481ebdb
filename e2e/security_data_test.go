package e2e

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	ctrlconfig "github.com/tekvirt/tekvirt/controllers/config"
	"github.com/tekvirt/tekvirt/controllers/datavolume"
	"github.com/tekvirt/tekvirt/controllers/requester"
	"github.com/tekvirt/tekvirt/e2e/framework"
)

// Attacks on disks and data paths: clones, upload tokens, idle connections.

// TestAttackCloneBypasses: a tenant with edit in their own namespace tries
// every path to a clone of another namespace's disk that admission alone
// did not close: switching a DataVolume's source on update, adding a clone
// template to an existing VM, pointing a DataSource at the victim's PVC,
// and a DataSource re-pointed (by someone allowed to) after the tenant's
// DataVolume was admitted. Each is refused naming the user and the
// permission, and the tenant's namespace ends up with none of the victim's
// data.
func TestAttackCloneBypasses(t *testing.T) {
	f := framework.New(t)
	c := f.VMClient(t)
	ctx := context.Background()
	victim, mine := f.Namespace(t), f.Namespace(t)
	size := corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("16Mi")}}
	secret := &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: victim, Name: "secret"},
		Spec: cdiv1.DataVolumeSpec{Source: &cdiv1.DataVolumeSource{Blank: &cdiv1.DataVolumeBlankImage{}}, Storage: &cdiv1.StorageSpec{Resources: size}}}
	if err := c.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	waitDVPhase(t, c, secret, cdiv1.Succeeded)
	marker := []byte("victim-secret-" + rand.String(12))
	if err := os.WriteFile(filepath.Join(volumeDir(t, c, victim, "secret"), "disk.img"), marker, 0o644); err != nil {
		t.Fatal(err)
	}
	tenant := userClient(t, f, mine, "e2e-tenant")
	stolen := cdiv1.DataVolumeSource{PVC: &cdiv1.DataVolumeSourcePVC{Namespace: victim, Name: "secret"}}
	refused := func(what string, err error, want string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want %q", what, err, want)
		}
	}

	// 1. An upload DataVolume switched to the victim's PVC.
	up := &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: mine, Name: "up"},
		Spec: cdiv1.DataVolumeSpec{Source: &cdiv1.DataVolumeSource{Upload: &cdiv1.DataVolumeSourceUpload{}}, Storage: &cdiv1.StorageSpec{Resources: size}}}
	if err := tenant.Create(ctx, up); err != nil {
		t.Fatal(err)
	}
	refused("DataVolume source switched", update(ctx, tenant, up, func() { up.Spec.Source = stolen.DeepCopy() }),
		"spec.source of DataVolume "+mine+"/up cannot change after creation")

	// 2. A clone template added to an existing VM.
	vm := framework.GuestVM(mine, "later", framework.GuestImage, v1.RunStrategyHalted)
	if err := tenant.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
	err := update(ctx, tenant, vm, func() {
		vm.Spec.DataVolumeTemplates = []v1.DataVolumeTemplateSpec{{ObjectMeta: metav1.ObjectMeta{Name: "stolen"},
			Spec: cdiv1.DataVolumeSpec{Source: stolen.DeepCopy(), Storage: &cdiv1.StorageSpec{Resources: size}}}}
	})
	refused("VM update adding a clone template", err, "e2e-tenant may not clone PVC "+victim+"/secret")

	// A DataVolume that claims, in the requester annotation, to be asked
	// for by the cluster admin: the record is the tenant's all the same.
	forged := &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: mine, Name: "forged",
		Annotations: map[string]string{requester.Annotation: `{"username":"kubernetes-admin","groups":["system:masters"]}`}},
		Spec: cdiv1.DataVolumeSpec{Source: stolen.DeepCopy(), Storage: &cdiv1.StorageSpec{Resources: size}}}
	refused("DataVolume with a forged requester", tenant.Create(ctx, forged), "e2e-tenant may not clone PVC "+victim+"/secret")

	// 3. A DataSource of the tenant's on the victim's PVC.
	ds := &cdiv1.DataSource{ObjectMeta: metav1.ObjectMeta{Namespace: mine, Name: "shared"},
		Spec: cdiv1.DataSourceSpec{Source: cdiv1.DataSourceSource{PVC: stolen.PVC.DeepCopy()}}}
	refused("DataSource on the victim's PVC", tenant.Create(ctx, ds.DeepCopy()), "e2e-tenant may not point DataSource "+mine+"/shared at PVC "+victim+"/secret")

	// 4. The tenant's DataVolume waits for a DataSource that does not exist
	// yet; an admin then publishes it on the victim's PVC. The clone is
	// checked as the tenant when it would start.
	late := &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: mine, Name: "late"},
		Spec: cdiv1.DataVolumeSpec{SourceRef: &cdiv1.DataVolumeSourceRef{Kind: cdiv1.DataVolumeDataSource, Name: "shared"}, Storage: &cdiv1.StorageSpec{Resources: size}}}
	if err := tenant.Create(ctx, late); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, ds); err != nil {
		t.Fatal(err)
	}
	waitDVPhase(t, c, late, cdiv1.Failed)
	if msg := readyMessage(late); !strings.Contains(msg, "e2e-tenant may not clone PVC "+victim+"/secret") {
		t.Errorf("the late clone failed with %q; want the tenant and the victim's PVC named", msg)
	}

	// Nothing of the victim's reached the tenant: no DataVolume from the
	// template, no run in the victim's namespace, no disk holding the marker.
	if err := c.Get(ctx, client.ObjectKey{Namespace: mine, Name: "stolen"}, &cdiv1.DataVolume{}); !apierrors.IsNotFound(err) {
		t.Errorf("the refused template's DataVolume: %v", err)
	}
	runs, err := f.Tekton.TektonV1().TaskRuns(victim).List(ctx, metav1.ListOptions{LabelSelector: datavolume.CloneTargetNamespaceLabel + "=" + mine})
	if err != nil || len(runs.Items) != 0 {
		t.Errorf("clone senders in the victim's namespace: %d (%v)", len(runs.Items), err)
	}
	for _, pvc := range []string{"up", "late"} {
		claim := &corev1.PersistentVolumeClaim{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: mine, Name: pvc}, claim); err != nil || claim.Spec.VolumeName == "" {
			continue // never bound: nothing was written to it
		}
		if data, err := os.ReadFile(filepath.Join(volumeDir(t, c, mine, pvc), "disk.img")); err == nil && bytes.Contains(data, marker) {
			t.Errorf("PVC %s/%s holds the victim's data", mine, pvc)
		}
	}
}

// TestAttackIdleConnections: anyone on the pod network can open connections
// to the controller and send nothing. With 5,000 such connections open on
// the webhook and 1,000 on the upload proxy, the webhook still admits a
// good VM and refuses a bad one by name; and the servers close the idle
// connections themselves (the webhook within its 32 s TLS handshake limit,
// the upload proxy within its 10 s), so they cannot pin descriptors.
func TestAttackIdleConnections(t *testing.T) {
	f := framework.New(t)
	c := f.VMClient(t)
	ns := f.Namespace(t)
	ctx := context.Background()
	pods, err := f.Kube.CoreV1().Pods(ctrlconfig.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=tekvirt-controller"})
	if err != nil || len(pods.Items) != 1 || pods.Items[0].Status.PodIP == "" {
		t.Fatalf("the controller pod: %v", err)
	}
	ip := pods.Items[0].Status.PodIP
	webhook := openIdle(t, net.JoinHostPort(ip, "9443"), 5000)
	proxy := openIdle(t, net.JoinHostPort(ip, "8444"), 1000)
	opened := time.Now()

	start := time.Now()
	good := framework.GuestVM(ns, "admitted", framework.GuestImage, v1.RunStrategyHalted)
	if err := c.Create(ctx, good); err != nil {
		t.Errorf("a good VM with 5,000 idle connections open: %v", err)
	}
	bad := framework.GuestVM(ns, "refused", framework.GuestImage, v1.RunStrategyHalted)
	bad.Spec.Template.Spec.Domain.Devices.Interfaces = []v1.Interface{{Name: "default", InterfaceBindingMethod: v1.InterfaceBindingMethod{SRIOV: &v1.InterfaceSRIOV{}}}}
	if err := c.Create(ctx, bad); err == nil || !strings.Contains(err.Error(), "interfaces[0].sriov") {
		t.Errorf("a bad VM with 5,000 idle connections open: err = %v", err)
	}
	t.Logf("admission with %d+%d idle connections open: %s", len(webhook), len(proxy), time.Since(start).Round(time.Millisecond))

	for _, s := range []struct {
		name  string
		conns []net.Conn
		limit time.Duration
	}{{"upload proxy", proxy, 10 * time.Second}, {"webhook", webhook, 32 * time.Second}} {
		open := stillOpen(s.conns, opened.Add(s.limit+15*time.Second))
		t.Logf("%s: %d of %d idle connections still open %s after they were opened", s.name, open, len(s.conns), time.Since(opened).Round(time.Second))
		if open > 0 {
			t.Errorf("%s keeps %d idle connections open past its %s limit", s.name, open, s.limit)
		}
	}
}

// openIdle opens n TCP connections to addr that send nothing.
func openIdle(t *testing.T, addr string, n int) []net.Conn {
	t.Helper()
	conns := make([]net.Conn, 0, n)
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	for range n {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatalf("connection %d to %s: %v", len(conns)+1, addr, err)
		}
		conns = append(conns, c)
	}
	return conns
}

// stillOpen waits until deadline for the server to close conns and says
// how many it did not.
func stillOpen(conns []net.Conn, deadline time.Time) int {
	open := make(chan bool, len(conns))
	for _, c := range conns {
		go func() {
			_ = c.SetReadDeadline(deadline)
			_, err := c.Read(make([]byte, 1))
			var ne net.Error
			open <- errors.As(err, &ne) && ne.Timeout()
		}()
	}
	n := 0
	for range conns {
		if <-open {
			n++
		}
	}
	return n
}

// TestAttackStaleUploadToken: an upload token outlives the DataVolume it
// was issued for; one for a deleted DataVolume is refused by the DataVolume
// of the same name made later (tokens name the PVC's UID), which nothing
// is written to, and a token of its own works.
func TestAttackStaleUploadToken(t *testing.T) {
	f := framework.New(t)
	c := f.VMClient(t)
	ns := f.Namespace(t)
	ctx := context.Background()
	newDV := func() *cdiv1.DataVolume {
		return &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "target"},
			Spec: cdiv1.DataVolumeSpec{Source: &cdiv1.DataVolumeSource{Upload: &cdiv1.DataVolumeSourceUpload{}},
				Storage: &cdiv1.StorageSpec{Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("16Mi")}}}}}
	}
	first := newDV()
	if err := c.Create(ctx, first); err != nil {
		t.Fatal(err)
	}
	waitDVPhase(t, c, first, cdiv1.UploadReady)
	stale := uploadToken(t, c, ns, first.Name)
	if err := c.Delete(ctx, first); err != nil {
		t.Fatal(err)
	}
	framework.WaitGone(t, c, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: first.Name}}, time.Minute)
	second := newDV()
	if err := c.Create(ctx, second); err != nil {
		t.Fatal(err)
	}
	waitDVPhase(t, c, second, cdiv1.UploadReady)
	proxy := uploadProxy(t, f, c)
	data := bytes.Repeat([]byte("stale!"), 4096)
	if code, msg := proxy.post(t, "/v1beta1/upload", stale, "", bytes.NewReader(data)); code != http.StatusUnauthorized || !strings.Contains(msg, "for an earlier PVC "+ns+"/target") {
		t.Errorf("the deleted DataVolume's token: got %d %q, want 401 naming the earlier PVC", code, msg)
	}
	if entries := volumeFiles(t, c, ns, second.Name); len(entries) != 0 {
		t.Errorf("the refused upload wrote %v", entries)
	}
	if code, msg := proxy.post(t, "/v1beta1/upload", uploadToken(t, c, ns, second.Name), "", bytes.NewReader(data)); code != http.StatusOK {
		t.Fatalf("the new DataVolume's own token: got %d %q", code, msg)
	}
	waitDVPhase(t, c, second, cdiv1.Succeeded)
}
