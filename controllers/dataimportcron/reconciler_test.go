package dataimportcron

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	pipelinev1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"knative.dev/pkg/apis"
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
	if err := pipelinev1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	url := "docker://registry.example:5000/os/fedora:latest"
	cron := &cdiv1.DataImportCron{ObjectMeta: metav1.ObjectMeta{Namespace: "os", Name: "fedora-cron"},
		Spec: cdiv1.DataImportCronSpec{Schedule: "0 * * * *", ManagedDataSource: "fedora", ImportsToKeep: &keep,
			Template: cdiv1.DataVolume{Spec: cdiv1.DataVolumeSpec{Source: &cdiv1.DataVolumeSource{Registry: &cdiv1.DataVolumeSourceRegistry{URL: &url}},
				Storage: &cdiv1.StorageSpec{}}}}}
	f := &cronFixture{t: t, now: time.Date(2026, 11, 29, 10, 30, 0, 0, time.UTC), digest: d1}
	f.c = fake.NewClientBuilder().WithScheme(s).WithObjects(cron).WithStatusSubresource(cron, &cdiv1.DataVolume{}, &pipelinev1.TaskRun{}).Build()
	f.r = &Reconciler{Client: f.c, StepImage: "reg/step:1", Now: func() time.Time { return f.now }}
	return f
}

// reconcile reconciles at the clock moved on by after; when that started a
// poll run, it plays Tekton (the run reports f.digest, or fails with f.err)
// and reconciles again.
func (f *cronFixture) reconcile(after time.Duration) *cdiv1.DataImportCron {
	f.t.Helper()
	f.now = f.now.Add(after)
	f.reconcileOnce()
	if run := f.pollRun(); run != nil {
		f.polls++
		f.finish(run, f.digest, f.err)
		f.reconcileOnce()
		if f.pollRun() != nil {
			f.t.Fatal("the finished poll run was not deleted")
		}
	}
	return f.cron()
}

func (f *cronFixture) reconcileOnce() {
	f.t.Helper()
	if _, err := f.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "os", Name: "fedora-cron"}}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *cronFixture) pollRun() *pipelinev1.TaskRun {
	run := &pipelinev1.TaskRun{}
	if err := f.c.Get(context.Background(), client.ObjectKey{Namespace: "os", Name: "fedora-cron-poll"}, run); err != nil {
		return nil
	}
	return run
}

// finish ends run as Tekton would: succeeded with a digest result, or
// failed with the step's error result.
func (f *cronFixture) finish(run *pipelinev1.TaskRun, digest string, err error) {
	f.t.Helper()
	if err == nil {
		run.Status.SetCondition(&apis.Condition{Type: apis.ConditionSucceeded, Status: corev1.ConditionTrue, Reason: "Succeeded"})
		run.Status.Results = []pipelinev1.TaskRunResult{{Name: "digest", Type: pipelinev1.ResultsTypeString, Value: *pipelinev1.NewStructuredValues(digest)}}
	} else {
		run.Status.SetCondition(&apis.Condition{Type: apis.ConditionSucceeded, Status: corev1.ConditionFalse, Reason: "Failed",
			Message: `"step-import" exited with code 1`})
		run.Status.Results = []pipelinev1.TaskRunResult{{Name: "error", Type: pipelinev1.ResultsTypeString, Value: *pipelinev1.NewStructuredValues(err.Error())}}
	}
	if err := f.c.Status().Update(context.Background(), run); err != nil {
		f.t.Fatal(err)
	}
}

func (f *cronFixture) cron() *cdiv1.DataImportCron {
	f.t.Helper()
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

// TestPollRunsInTheCronsNamespace: the digest is read by a run in the
// cron's namespace that gets the template's secretRef and certConfigMap
// from the kubelet; while it runs nothing is polled again and the last
// poll's error stays.
func TestPollRunsInTheCronsNamespace(t *testing.T) {
	f := newCronFixture(t, 1)
	c := f.cron()
	secret, certs := "creds", "registry-ca"
	c.Spec.Template.Spec.Source.Registry.SecretRef, c.Spec.Template.Spec.Source.Registry.CertConfigMap = &secret, &certs
	if err := f.c.Update(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	f.reconcileOnce()
	run := f.pollRun()
	if run == nil {
		t.Fatal("a new cron starts a poll run")
	}
	step := run.Spec.TaskSpec.Steps[0]
	if got := strings.Join(step.Args, " "); got != "--registry=docker://registry.example:5000/os/fedora:latest --digest-only --cert-dir=/etc/tekvirt/import-certs" {
		t.Errorf("args %q", got)
	}
	env := map[string]string{}
	for _, e := range step.Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			env[e.Name] = e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key
		}
	}
	if env["IMPORTER_ACCESS_KEY_ID"] != "creds/accessKeyId" || env["IMPORTER_SECRET_KEY"] != "creds/secretKey" {
		t.Errorf("credentials env %v", env)
	}
	vols := run.Spec.TaskSpec.Volumes
	if len(vols) != 1 || vols[0].ConfigMap == nil || vols[0].ConfigMap.Name != certs {
		t.Errorf("volumes %+v", vols)
	}
	if len(run.Spec.TaskSpec.Workspaces) != 0 || len(run.Spec.TaskSpec.Params) != 0 || run.Spec.Timeout.Duration != pollTimeout ||
		len(run.OwnerReferences) != 1 || run.OwnerReferences[0].Name != "fedora-cron" || run.Spec.ServiceAccountName != "" {
		t.Errorf("run %+v", run)
	}

	f.finish(run, "", errors.New("registry.example:5000: no such host"))
	c = f.reconcile(0)
	if u := cond(c, cdiv1.DataImportCronUpToDate); u.Reason != "DigestError" ||
		!strings.Contains(u.Message, "TaskRun os/fedora-cron-poll): registry.example:5000: no such host") {
		t.Fatalf("failed poll: %+v", u)
	}
	f.now = f.now.Add(time.Hour) // due: a second run, left running
	f.reconcileOnce()
	first := f.pollRun()
	if first == nil {
		t.Fatal("no poll run when due")
	}
	first.Annotations = map[string]string{"test": "first"} // gone if the run is made again
	if err := f.c.Update(context.Background(), first); err != nil {
		t.Fatal(err)
	}
	f.reconcileOnce()
	if run := f.pollRun(); run == nil || run.Annotations["test"] != "first" {
		t.Fatalf("one poll run at a time, kept while it runs: %+v", run)
	}
	if u := cond(f.cron(), cdiv1.DataImportCronUpToDate); u.Reason != "DigestError" {
		t.Errorf("while polling, the last error stays: %+v", u)
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
