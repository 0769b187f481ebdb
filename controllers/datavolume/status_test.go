package datavolume

import (
	"errors"
	"strings"
	"testing"

	pipelinev1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"knative.dev/pkg/apis"
	duckv1 "knative.dev/pkg/apis/duck/v1"

	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/tekvirt/tekvirt/controllers/hostpath"
)

func run(status corev1.ConditionStatus, started bool) *pipelinev1.TaskRun {
	r := &pipelinev1.TaskRun{ObjectMeta: metav1.ObjectMeta{Name: "dv-import-0"}}
	if started {
		now := metav1.Now()
		r.Status.StartTime = &now
	}
	if status != "" {
		r.Status.Status = duckv1.Status{Conditions: duckv1.Conditions{{Type: apis.ConditionSucceeded, Status: status, Message: "msg"}}}
	}
	return r
}

// pullRefused is a run whose step image the kubelet could not pull.
func pullRefused(status corev1.ConditionStatus, reason string) *pipelinev1.TaskRun {
	r := run(status, true)
	r.Status.Conditions[0].Reason, r.Status.Conditions[0].Message = reason, `build step "step-import" is pending with reason "401 Unauthorized"`
	return r
}

// podRefusedRun is a run whose Pod the API server refuses.
func podRefusedRun(reason string) *pipelinev1.TaskRun {
	r := run(corev1.ConditionUnknown, true)
	r.Status.Conditions[0].Reason = reason
	r.Status.Conditions[0].Message = `TaskRun Pod exceeded available resources: pods "dv-import-0-pod" is forbidden: exceeded quota: none`
	return r
}

func cond(st cdiv1.DataVolumeStatus, t cdiv1.DataVolumeConditionType) cdiv1.DataVolumeCondition {
	for _, c := range st.Conditions {
		if c.Type == t {
			return c
		}
	}
	return cdiv1.DataVolumeCondition{}
}

func TestNextStatus(t *testing.T) {
	bound := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "dv"}, Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}}
	pending := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "dv"}, Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending}}
	for _, tc := range []struct {
		name     string
		obs      observed
		phase    cdiv1.DataVolumePhase
		progress cdiv1.DataVolumeProgress
		ready    corev1.ConditionStatus
		running  corev1.ConditionStatus
	}{
		{"unsupported source", observed{invalid: errors.New("spec.source.s3 is not supported")}, cdiv1.Failed, "", corev1.ConditionFalse, ""},
		{"claim pending", observed{pvc: pending}, cdiv1.Pending, "", corev1.ConditionFalse, ""},
		{"run created", observed{pvc: bound, run: run("", false)}, cdiv1.ImportScheduled, "", "", corev1.ConditionFalse},
		{"run running", observed{pvc: bound, run: run(corev1.ConditionUnknown, true)}, cdiv1.ImportInProgress, "N/A", "", corev1.ConditionTrue},
		{"run succeeded", observed{pvc: bound, run: run(corev1.ConditionTrue, true)}, cdiv1.Succeeded, "100.0%", corev1.ConditionTrue, corev1.ConditionFalse},
		{"run failed, retrying", observed{pvc: bound, run: run(corev1.ConditionFalse, true)}, cdiv1.ImportInProgress, "", "", corev1.ConditionFalse},
		{"upload run created", observed{pvc: bound, upload: true, run: run("", false)}, cdiv1.UploadScheduled, "", "", corev1.ConditionFalse},
		{"upload step not answering yet", observed{pvc: bound, upload: true, run: run(corev1.ConditionUnknown, true)}, cdiv1.UploadScheduled, "N/A", "", corev1.ConditionTrue},
		{"upload step waiting", observed{pvc: bound, upload: true, run: run(corev1.ConditionUnknown, true), progress: "N/A"}, cdiv1.UploadReady, "N/A", "", corev1.ConditionTrue},
		{"uploading", observed{pvc: bound, upload: true, run: run(corev1.ConditionUnknown, true), progress: "12.50%"}, cdiv1.UploadReady, "12.50%", "", corev1.ConditionTrue},
		{"upload done", observed{pvc: bound, upload: true, run: run(corev1.ConditionTrue, true)}, cdiv1.Succeeded, "100.0%", corev1.ConditionTrue, corev1.ConditionFalse},
		{"clone running", observed{pvc: bound, clone: true, run: run(corev1.ConditionUnknown, true)}, cdiv1.CloneInProgress, "N/A", "", corev1.ConditionTrue},
		{"snapshot being restored", observed{pvc: pending, clone: true}, cdiv1.Pending, "", corev1.ConditionFalse, ""},
		{"snapshot restored", observed{pvc: bound, clone: true, restored: true}, cdiv1.Succeeded, "100.0%", corev1.ConditionTrue, corev1.ConditionFalse},
		{"clone waiting for its source", observed{pvc: bound, clone: true, sourcePending: "waiting for the source PersistentVolumeClaim ns/src: its DataVolume is ImportInProgress"},
			cdiv1.CloneScheduled, "", corev1.ConditionFalse, corev1.ConditionFalse},
		{"clone waiting for its source's volume", observed{clone: true, sourcePending: "waiting for the source PersistentVolumeClaim ns/src to get its volume"},
			cdiv1.CloneScheduled, "", corev1.ConditionFalse, corev1.ConditionFalse},
		{"image not pulled", observed{pvc: bound, run: pullRefused(corev1.ConditionUnknown, "PullImageFailed")}, cdiv1.ImportScheduled, "", corev1.ConditionFalse, corev1.ConditionFalse},
		{"image not pulled, run given up", observed{pvc: bound, run: pullRefused(corev1.ConditionFalse, "TaskRunImagePullFailed")}, cdiv1.ImportScheduled, "", corev1.ConditionFalse, corev1.ConditionFalse},
		{"Pod refused by a quota", observed{pvc: bound, run: podRefusedRun("ExceededResourceQuota")}, cdiv1.ImportScheduled, "", corev1.ConditionFalse, corev1.ConditionFalse},
		{"Pod refused by admission", observed{pvc: bound, run: podRefusedRun("PodAdmissionFailed")}, cdiv1.ImportScheduled, "", corev1.ConditionFalse, corev1.ConditionFalse},
		{"failed for good", observed{pvc: bound, run: run(corev1.ConditionFalse, true), failed: "import failed: checksum"}, cdiv1.Failed, "", corev1.ConditionFalse, corev1.ConditionFalse},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := nextStatus(&cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Name: "dv"}}, tc.obs, metav1.Now())
			if st.Phase != tc.phase || st.Progress != tc.progress {
				t.Errorf("phase %q progress %q, want %q %q", st.Phase, st.Progress, tc.phase, tc.progress)
			}
			if tc.ready != "" && cond(st, cdiv1.DataVolumeReady).Status != tc.ready {
				t.Errorf("Ready = %+v", cond(st, cdiv1.DataVolumeReady))
			}
			if tc.running != "" && cond(st, cdiv1.DataVolumeRunning).Status != tc.running {
				t.Errorf("Running = %+v", cond(st, cdiv1.DataVolumeRunning))
			}
			if r := cond(st, cdiv1.DataVolumeReady); strings.HasPrefix(tc.name, "image not pulled") && (r.Reason != ImagePullFailedReason || !strings.Contains(r.Message, "401 Unauthorized")) {
				t.Errorf("Ready = %+v, want ImagePullFailed with the kubelet's message", r)
			}
			if r := cond(st, cdiv1.DataVolumeRunning); tc.obs.sourcePending != "" && (r.Reason != CloneSourceNotPopulatedReason || r.Message != tc.obs.sourcePending) {
				t.Errorf("Running = %+v, want %s with the source's state", r, CloneSourceNotPopulatedReason)
			}
			if r := cond(st, cdiv1.DataVolumeRunning); strings.HasPrefix(tc.name, "Pod refused") && (r.Reason == "" || !strings.Contains(r.Message, "exceeded quota")) {
				t.Errorf("Running = %+v, want the refusal's reason and the API server's message", r)
			}
			if tc.obs.invalid != nil && !strings.Contains(cond(st, cdiv1.DataVolumeReady).Message, "s3") {
				t.Errorf("Ready message does not name the source: %+v", cond(st, cdiv1.DataVolumeReady))
			}
		})
	}
}

func TestSupportedAndClaim(t *testing.T) {
	url := "docker://127.0.0.1:5000/disk:1"
	size := corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}
	for name, tc := range map[string]struct {
		src  *cdiv1.DataVolumeSource
		want string
	}{
		"http":                    {&cdiv1.DataVolumeSource{HTTP: &cdiv1.DataVolumeSourceHTTP{URL: "http://x"}}, ""},
		"registry":                {&cdiv1.DataVolumeSource{Registry: &cdiv1.DataVolumeSourceRegistry{URL: &url}}, ""},
		"blank":                   {&cdiv1.DataVolumeSource{Blank: &cdiv1.DataVolumeBlankImage{}}, ""},
		"upload":                  {&cdiv1.DataVolumeSource{Upload: &cdiv1.DataVolumeSourceUpload{}}, ""},
		"gcs":                     {&cdiv1.DataVolumeSource{GCS: &cdiv1.DataVolumeSourceGCS{URL: "gs://x"}}, "spec.source.gcs is not supported"},
		"s3":                      {&cdiv1.DataVolumeSource{S3: &cdiv1.DataVolumeSourceS3{URL: "s3://x"}}, "spec.source.s3 is not supported"},
		"none":                    {nil, "spec.source or spec.sourceRef is required"},
		"two":                     {&cdiv1.DataVolumeSource{HTTP: &cdiv1.DataVolumeSourceHTTP{URL: "x"}, Blank: &cdiv1.DataVolumeBlankImage{}}, "exactly one source"},
		"headers":                 {&cdiv1.DataVolumeSource{HTTP: &cdiv1.DataVolumeSourceHTTP{URL: "x", ExtraHeaders: []string{"a: b"}}}, "extraHeaders"},
		"no url":                  {&cdiv1.DataVolumeSource{HTTP: &cdiv1.DataVolumeSourceHTTP{}}, "spec.source.http.url is required"},
		"no image":                {&cdiv1.DataVolumeSource{Registry: &cdiv1.DataVolumeSourceRegistry{URL: new(string)}}, "spec.source.registry.url is required"},
		"no claim":                {&cdiv1.DataVolumeSource{PVC: &cdiv1.DataVolumeSourcePVC{Namespace: "ns"}}, "spec.source.pvc.name is required"},
		"pvc":                     {&cdiv1.DataVolumeSource{PVC: &cdiv1.DataVolumeSourcePVC{Name: "src"}}, ""},
		"snapshot":                {&cdiv1.DataVolumeSource{Snapshot: &cdiv1.DataVolumeSourceSnapshot{Name: "snap", Namespace: "ns"}}, ""},
		"snapshot without a name": {&cdiv1.DataVolumeSource{Snapshot: &cdiv1.DataVolumeSourceSnapshot{}}, "spec.source.snapshot.name is required"},
		// Cloned across, authorized as clones are (TestTransferClaim).
		"another namespace's snapshot": {&cdiv1.DataVolumeSource{Snapshot: &cdiv1.DataVolumeSourceSnapshot{Name: "snap", Namespace: "other"}}, ""},
	} {
		dv := &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: "ns"}, Spec: cdiv1.DataVolumeSpec{Source: tc.src}}
		checkErr(t, name, Supported(dv), tc.want)
	}
	for name, tc := range map[string]struct {
		ref  *cdiv1.DataVolumeSourceRef
		src  *cdiv1.DataVolumeSource
		want string
	}{
		"DataSource":   {&cdiv1.DataVolumeSourceRef{Kind: "DataSource", Name: "fedora"}, nil, ""},
		"other kind":   {&cdiv1.DataVolumeSourceRef{Kind: "VolumeSnapshot", Name: "x"}, nil, `spec.sourceRef.kind "VolumeSnapshot" is not supported`},
		"and a source": {&cdiv1.DataVolumeSourceRef{Kind: "DataSource", Name: "x"}, &cdiv1.DataVolumeSource{Blank: &cdiv1.DataVolumeBlankImage{}}, "exclusive"},
	} {
		checkErr(t, name, Supported(&cdiv1.DataVolume{Spec: cdiv1.DataVolumeSpec{SourceRef: tc.ref, Source: tc.src}}), tc.want)
	}
	dv := &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "dv"},
		Spec: cdiv1.DataVolumeSpec{Storage: &cdiv1.StorageSpec{Resources: corev1.VolumeResourceRequirements{Requests: size}}}}
	pvc, err := claimFor(dv, nil)
	if err != nil || pvc.Spec.AccessModes[0] != corev1.ReadWriteOnce || pvc.Name != "dv" || len(pvc.Annotations) != 0 {
		t.Fatalf("claim = %+v, %v", pvc, err)
	}
	restore := dv.DeepCopy()
	restore.Spec.Source = &cdiv1.DataVolumeSource{Snapshot: &cdiv1.DataVolumeSourceSnapshot{Name: "snap"}}
	if pvc, err := claimFor(restore, nil); err != nil || pvc.Spec.DataSource == nil || pvc.Spec.DataSource.Kind != "VolumeSnapshot" ||
		pvc.Spec.DataSource.Name != "snap" || *pvc.Spec.DataSource.APIGroup != SnapshotGroup {
		t.Errorf("a snapshot's claim: dataSource %+v, %v", pvc.Spec.DataSource, err)
	}
	shared := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "tekvirt-shared"}, Provisioner: hostpath.Provisioner,
		Parameters: map[string]string{hostpath.ParamShared: "true"}}
	if pvc, err := claimFor(dv, shared); err != nil || len(pvc.Spec.AccessModes) != 1 || pvc.Spec.AccessModes[0] != corev1.ReadWriteMany {
		t.Fatalf("claim of a shared class's DataVolume without access modes: %v, %v", pvc.Spec.AccessModes, err)
	}
	dv.Spec.Storage.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	if pvc, err := claimFor(dv, shared); err != nil || pvc.Spec.AccessModes[0] != corev1.ReadWriteOnce {
		t.Fatalf("access modes asked for are kept: %v, %v", pvc.Spec.AccessModes, err)
	}
	dv.Spec.Storage.AccessModes = nil
	dv.Annotations = map[string]string{hostpath.AnnProvisionOnNode: "node-2", "other": "x"}
	if pvc, err := claimFor(dv, nil); err != nil || len(pvc.Annotations) != 2 || pvc.Annotations[hostpath.AnnProvisionOnNode] != "node-2" || pvc.Annotations[hostpath.AnnSelectedNode] != "node-2" {
		t.Fatalf("claim of a DataVolume asked on a node: annotations %v, %v", pvc.Annotations, err)
	}
	dv.Spec.Storage.Resources.Requests = nil
	if _, err := claimFor(dv, nil); err == nil || !strings.Contains(err.Error(), "requests.storage is required") {
		t.Errorf("no size: %v", err)
	}
}

// TestSucceededStaysSucceeded: once done, a DataVolume whose run is gone
// (deleted, or not looked up) keeps its phase.
func TestSucceededStaysSucceeded(t *testing.T) {
	bound := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "dv"}, Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}}
	dv := &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Name: "dv"}, Status: cdiv1.DataVolumeStatus{Phase: cdiv1.Succeeded}}
	st := nextStatus(dv, observed{pvc: bound}, metav1.Now())
	if st.Phase != cdiv1.Succeeded || st.Progress != "100.0%" || cond(st, cdiv1.DataVolumeReady).Status != corev1.ConditionTrue {
		t.Errorf("status %+v", st)
	}
}

// checkErr expects err to contain want, or to be nil when want is "".
func checkErr(t *testing.T, name string, err error, want string) {
	t.Helper()
	if (want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), want)) {
		t.Errorf("%s: err = %v, want %q", name, err, want)
	}
}
