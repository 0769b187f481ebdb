package claimimport

import (
	"errors"
	"strings"
	"testing"

	pipelinev1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"knative.dev/pkg/apis"
	duckv1 "knative.dev/pkg/apis/duck/v1"
)

func claim(annotations map[string]string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "disk", Annotations: annotations}}
}

func TestDataVolume(t *testing.T) {
	for _, tc := range []struct {
		name string
		ann  map[string]string
		// check the DataVolume; err, when set, is the error's text.
		check func(t *testing.T, src string)
		err   string
	}{
		{name: "http by default, with its secret and CA", ann: map[string]string{AnnEndpoint: "https://images.test/disk.qcow2", AnnSecret: "creds", AnnCertConfigMap: "ca"},
			check: func(t *testing.T, src string) {
				if src != "http https://images.test/disk.qcow2 creds ca" {
					t.Errorf("source %s", src)
				}
			}},
		{name: "registry", ann: map[string]string{AnnEndpoint: "docker://reg.test/disk:1", AnnSource: "registry", AnnSecret: "pull"},
			check: func(t *testing.T, src string) {
				if src != "registry docker://reg.test/disk:1 pull" {
					t.Errorf("source %s", src)
				}
			}},
		{name: "blank", ann: map[string]string{AnnSource: "none"}, check: func(t *testing.T, src string) {
			if src != "blank" {
				t.Errorf("source %s", src)
			}
		}},
		{name: "s3 is refused by the annotation", ann: map[string]string{AnnEndpoint: "s3://b/k", AnnSource: "s3"}, err: `annotation cdi.kubevirt.io/storage.import.source: "s3" is not supported`},
		{name: "archive is refused by the annotation", ann: map[string]string{AnnEndpoint: "https://x/a.tar", AnnContentType: "archive"}, err: `annotation cdi.kubevirt.io/storage.contentType: "archive"`},
		{name: "no endpoint", ann: map[string]string{AnnSource: "http"}, err: "annotation cdi.kubevirt.io/storage.import.endpoint is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dv, err := DataVolume(claim(tc.ann))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if dv.Name != "disk" || dv.Namespace != "ns" {
				t.Errorf("DataVolume %s/%s", dv.Namespace, dv.Name)
			}
			var src string
			switch s := dv.Spec.Source; {
			case s.HTTP != nil:
				src = strings.Join([]string{"http", s.HTTP.URL, s.HTTP.SecretRef, s.HTTP.CertConfigMap}, " ")
			case s.Registry != nil:
				src = strings.Join([]string{"registry", *s.Registry.URL, *s.Registry.SecretRef}, " ")
			case s.Blank != nil:
				src = "blank"
			}
			tc.check(t, src)
		})
	}
}

func TestAnnotations(t *testing.T) {
	run := func(status corev1.ConditionStatus, pod, msg string) *pipelinev1.TaskRun {
		r := &pipelinev1.TaskRun{}
		r.Status.PodName = pod
		r.Status.Status = duckv1.Status{Conditions: duckv1.Conditions{{Type: apis.ConditionSucceeded, Status: status, Message: msg}}}
		return r
	}
	for _, tc := range []struct {
		name              string
		run               *pipelinev1.TaskRun
		invalid           error
		phase, running, m string
	}{
		{"no run yet", nil, nil, "Pending", "false", ""},
		{"run without its Pod", run(corev1.ConditionUnknown, "", "pending"), nil, "Pending", "false", "pending"},
		{"importing", run(corev1.ConditionUnknown, "importer-disk-pod", "running"), nil, "Running", "true", "running"},
		{"done", run(corev1.ConditionTrue, "importer-disk-pod", ""), nil, "Succeeded", "false", "Import Complete"},
		{"failed", run(corev1.ConditionFalse, "importer-disk-pod", "source not found"), nil, "Failed", "false", "source not found"},
		{"invalid annotations", nil, errors.New("annotation x"), "Failed", "false", "annotation x"},
	} {
		got := Annotations(tc.run, tc.invalid)
		if got[AnnPodPhase] != tc.phase || got[AnnRunning] != tc.running || got[AnnRunningMessage] != tc.m {
			t.Errorf("%s: %v", tc.name, got)
		}
		if tc.run != nil && got[AnnImportPodName] != tc.run.Status.PodName {
			t.Errorf("%s: importPodName %q", tc.name, got[AnnImportPodName])
		}
	}
}
