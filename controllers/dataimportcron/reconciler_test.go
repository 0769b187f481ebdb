package dataimportcron

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
)

const (
	d1 = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	d2 = "sha256:2222222222222222222222222222222222222222222222222222222222222222"
)

// cronFixture runs the reconciler against a fake API with a settable clock
// and registry digest.
type cronFixture struct {
	t      *testing.T
	c      client.Client
	r      *Reconciler
	now    time.Time
	digest string
	polls  int
	err    error
}

func newCronFixture(t *testing.T, keep int32) *cronFixture {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := cdiv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	url := "docker://registry.example:5000/os/fedora:latest"
	cron := &cdiv1.DataImportCron{ObjectMeta: metav1.ObjectMeta{Namespace: "os", Name: "fedora-cron"},
		Spec: cdiv1.DataImportCronSpec{Schedule: "0 * * * *", ManagedDataSource: "fedora", ImportsToKeep: &keep,
			Template: cdiv1.DataVolume{Spec: cdiv1.DataVolumeSpec{Source: &cdiv1.DataVolumeSource{Registry: &cdiv1.DataVolumeSourceRegistry{URL: &url}},
				Storage: &cdiv1.StorageSpec{}}}}}
	f := &cronFixture{t: t, now: time.Date(2026, 11, 29, 10, 30, 0, 0, time.UTC), digest: d1}
	f.c = fake.NewClientBuilder().WithScheme(s).WithObjects(cron).WithStatusSubresource(cron, &cdiv1.DataVolume{}).Build()
	f.r = &Reconciler{Client: f.c, Now: func() time.Time { return f.now },
		Digest: func(context.Context, *cdiv1.DataImportCron) (string, error) { f.polls++; return f.digest, f.err }}
	return f
}

func (f *cronFixture) reconcile(after time.Duration) *cdiv1.DataImportCron {
	f.t.Helper()
	f.now = f.now.Add(after)
	if _, err := f.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "os", Name: "fedora-cron"}}); err != nil {
		f.t.Fatal(err)
	}
	c := &cdiv1.DataImportCron{}
	if err := f.c.Get(context.Background(), client.ObjectKey{Namespace: "os", Name: "fedora-cron"}, c); err != nil {
		f.t.Fatal(err)
	}
	return c
}

func (f *cronFixture) succeed(name string) {
	f.t.Helper()
	dv := &cdiv1.DataVolume{}
	if err := f.c.Get(context.Background(), client.ObjectKey{Namespace: "os", Name: name}, dv); err != nil {
		f.t.Fatal(err)
	}
	dv.Status.Phase = cdiv1.Succeeded
	if err := f.c.Status().Update(context.Background(), dv); err != nil {
		f.t.Fatal(err)
	}
}

func (f *cronFixture) imports() []string {
	list := &cdiv1.DataVolumeList{}
	if err := f.c.List(context.Background(), list); err != nil {
		f.t.Fatal(err)
	}
	var names []string
	for _, dv := range list.Items {
		names = append(names, dv.Name)
	}
	return names
}

func (f *cronFixture) dataSource() string {
	ds := &cdiv1.DataSource{}
	if err := f.c.Get(context.Background(), client.ObjectKey{Namespace: "os", Name: "fedora"}, ds); err != nil {
		return ""
	}
	return ds.Spec.Source.PVC.Name
}

func cond(c *cdiv1.DataImportCron, t cdiv1.DataImportCronConditionType) cdiv1.DataImportCronCondition {
	if p := findCond(c.Status, t); p != nil {
		return *p
	}
	return cdiv1.DataImportCronCondition{}
}

func TestCronImportsPublishesAndCollects(t *testing.T) {
	f := newCronFixture(t, 1)
	c := f.reconcile(0)
	dv := &cdiv1.DataVolume{}
	if err := f.c.Get(context.Background(), client.ObjectKey{Namespace: "os", Name: "fedora-111111111111"}, dv); err != nil {
		t.Fatalf("a new cron imports at once: %v", err)
	}
	if *dv.Spec.Source.Registry.URL != "docker://registry.example:5000/os/fedora@"+d1 || dv.Labels[CronLabel] != "fedora-cron" {
		t.Errorf("import %s: url %s labels %v", dv.Name, *dv.Spec.Source.Registry.URL, dv.Labels)
	}
	if len(c.Status.CurrentImports) != 1 || c.Status.CurrentImports[0].Digest != d1 || cond(c, cdiv1.DataImportCronProgressing).Status != corev1.ConditionTrue {
		t.Errorf("status while importing: %+v", c.Status)
	}
	if f.dataSource() != "" {
		t.Error("the DataSource was published before the import succeeded")
	}

	f.succeed("fedora-111111111111")
	c = f.reconcile(time.Minute) // 10:31, not due
	if f.polls != 1 || f.dataSource() != "fedora-111111111111" || cond(c, cdiv1.DataImportCronUpToDate).Status != corev1.ConditionTrue {
		t.Fatalf("after the import: polls %d, DataSource -> %q, status %+v", f.polls, f.dataSource(), c.Status)
	}
	if c.Status.LastImportedPVC == nil || c.Status.LastImportedPVC.Name != "fedora-111111111111" {
		t.Errorf("lastImportedPVC %+v", c.Status.LastImportedPVC)
	}

	f.reconcile(30 * time.Minute) // 11:01: due, same digest
	if f.polls != 2 || len(f.imports()) != 1 {
		t.Fatalf("same digest: polls %d, imports %v", f.polls, f.imports())
	}

	f.digest = d2
	f.reconcile(time.Hour) // 12:01: due, new digest
	if got := f.imports(); len(got) != 2 || f.dataSource() != "fedora-111111111111" {
		t.Fatalf("new digest: imports %v, DataSource -> %q (must stay on the old one until the new succeeds)", got, f.dataSource())
	}
	f.succeed("fedora-222222222222")
	c = f.reconcile(time.Second)
	if got := f.imports(); len(got) != 1 || got[0] != "fedora-222222222222" || f.dataSource() != "fedora-222222222222" {
		t.Fatalf("after the new import: imports %v (importsToKeep 1), DataSource -> %q", got, f.dataSource())
	}
	if cond(c, cdiv1.DataImportCronUpToDate).Status != corev1.ConditionTrue || len(c.Status.CurrentImports) != 0 {
		t.Errorf("status %+v", c.Status)
	}

	f.err = errors.New("registry.example:5000: connection refused")
	c = f.reconcile(time.Hour)
	if u := cond(c, cdiv1.DataImportCronUpToDate); u.Reason != "DigestError" || !strings.Contains(u.Message, "connection refused") || f.dataSource() != "fedora-222222222222" {
		t.Errorf("poll failure: %+v, DataSource -> %q", u, f.dataSource())
	}
}

func TestSupportedAndDue(t *testing.T) {
	url := "docker://r.example/img:1"
	secret := "creds"
	for name, tc := range map[string]struct {
		mod  func(*cdiv1.DataImportCron)
		want string
	}{
		"ok":           {func(*cdiv1.DataImportCron) {}, ""},
		"bad schedule": {func(c *cdiv1.DataImportCron) { c.Spec.Schedule = "every day" }, `spec.schedule "every day"`},
		"no source":    {func(c *cdiv1.DataImportCron) { c.Spec.ManagedDataSource = "" }, "spec.managedDataSource is required"},
		"http source": {func(c *cdiv1.DataImportCron) {
			c.Spec.Template.Spec.Source = &cdiv1.DataVolumeSource{HTTP: &cdiv1.DataVolumeSourceHTTP{URL: "http://x"}}
		}, "registry sources only"},
		"secret": {func(c *cdiv1.DataImportCron) { c.Spec.Template.Spec.Source.Registry.SecretRef = &secret }, ""},
	} {
		c := &cdiv1.DataImportCron{Spec: cdiv1.DataImportCronSpec{Schedule: "@daily", ManagedDataSource: "x",
			Template: cdiv1.DataVolume{Spec: cdiv1.DataVolumeSpec{Source: &cdiv1.DataVolumeSource{Registry: &cdiv1.DataVolumeSourceRegistry{URL: &url}}}}}}
		tc.mod(c)
		err := Supported(c)
		if (tc.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
	t0 := time.Date(2026, 11, 29, 10, 30, 0, 0, time.UTC)
	last := metav1.NewTime(t0)
	for _, tc := range []struct {
		at   time.Time
		last *metav1.Time
		due  bool
		next time.Time
	}{
		{t0, nil, true, t0.Add(30 * time.Minute)},
		{t0.Add(29 * time.Minute), &last, false, t0.Add(30 * time.Minute)},
		{t0.Add(30 * time.Minute), &last, true, t0.Add(90 * time.Minute)},
		{t0.Add(5 * time.Hour), &last, true, t0.Add(330 * time.Minute)},
	} {
		d, next, err := due("0 * * * *", tc.last, tc.at)
		if err != nil || d != tc.due || !next.Equal(tc.next) {
			t.Errorf("due at %s: %v %s %v, want %v %s", tc.at.Format(time.Kitchen), d, next.Format(time.Kitchen), err, tc.due, tc.next.Format(time.Kitchen))
		}
	}
}
