package vmsnapshot

import (
	"strings"
	"testing"
	"time"

	vsv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1 "kubevirt.io/api/core/v1"
	snapshotv1 "kubevirt.io/api/snapshot/v1beta1"

	"github.com/tekvirt/tekvirt/controllers/requester"
)

// sourceVM has a containerDisk, a DataVolume of a template, a claim of a
// class with snapshots and one of a class without.
func sourceVM() *v1.VirtualMachine {
	return &v1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vm", UID: "vm-uid",
			Annotations: map[string]string{requester.Annotation: `{"username":"creator"}`, "keep": "me"}},
		Spec: v1.VirtualMachineSpec{
			RunStrategy:         ptr.To(v1.RunStrategyAlways),
			DataVolumeTemplates: []v1.DataVolumeTemplateSpec{{ObjectMeta: metav1.ObjectMeta{Name: "root"}}},
			Template: &v1.VirtualMachineInstanceTemplateSpec{Spec: v1.VirtualMachineInstanceSpec{
				Domain: v1.DomainSpec{Firmware: &v1.Firmware{UUID: "fw"}, Devices: v1.Devices{Interfaces: []v1.Interface{{Name: "default", MacAddress: "02:00:00:00:00:01"}}}},
				Volumes: []v1.Volume{
					{Name: "boot", VolumeSource: v1.VolumeSource{ContainerDisk: &v1.ContainerDiskSource{Image: "img"}}},
					{Name: "root", VolumeSource: v1.VolumeSource{DataVolume: &v1.DataVolumeSource{Name: "root"}}},
					{Name: "data", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{
						PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-claim"}}}},
					{Name: "scratch", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{
						PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "scratch"}}}},
				},
			}},
		},
	}
}

func claim(name string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{"app": "x"},
			Annotations: map[string]string{"pv.kubernetes.io/bind-completed": "yes", "cdi.kubevirt.io/storage.usePopulator": "x", "user": "note"}},
		Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-" + name, StorageClassName: ptr.To("local"),
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}},
	}
}

func content(t *testing.T) (*snapshotv1.VirtualMachineSnapshot, *snapshotv1.VirtualMachineSnapshotContent) {
	t.Helper()
	s := &snapshotv1.VirtualMachineSnapshot{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "snap", UID: "snap-uid"}}
	classes := []vsv1.VolumeSnapshotClass{
		{ObjectMeta: metav1.ObjectMeta{Name: "other"}, Driver: "other.csi"},
		{ObjectMeta: metav1.ObjectMeta{Name: "plain"}, Driver: "local.csi"},
		{ObjectMeta: metav1.ObjectMeta{Name: "default", Annotations: map[string]string{defaultClassAnnotation: "true"}}, Driver: "local.csi"},
	}
	cls := snapshotClassFor(classes, "local.csi")
	if cls != "default" || snapshotClassFor(classes, "none.csi") != "" {
		t.Fatalf("snapshot class of local.csi %q, want the default one; of none.csi %q", cls, snapshotClassFor(classes, "none.csi"))
	}
	c := BuildContent(s, sourceVM(), []VolumeClaim{
		{Volume: "root", Claim: claim("root"), SnapshotClass: cls},
		{Volume: "data", Claim: claim("data-claim"), SnapshotClass: cls},
		{Volume: "scratch", Claim: claim("scratch")},
	})
	return s, c
}

func TestBuildContent(t *testing.T) {
	s, c := content(t)
	if c.Name != "vmsnapshot-content-snap-uid" || *c.Spec.VirtualMachineSnapshotName != "snap" {
		t.Errorf("content %s of %v", c.Name, c.Spec.VirtualMachineSnapshotName)
	}
	vm := c.Spec.Source.VirtualMachine
	if _, ok := vm.Annotations[requester.Annotation]; ok || vm.Annotations["keep"] != "me" {
		t.Errorf("the recorded VM's annotations %v: the requester must not be handed on, others kept", vm.Annotations)
	}
	if len(c.Spec.VolumeBackups) != 2 {
		t.Fatalf("backups %+v, want root and data", c.Spec.VolumeBackups)
	}
	b := c.Spec.VolumeBackups[1]
	if b.VolumeName != "data" || b.PersistentVolumeClaim.Name != "data-claim" || *b.VolumeSnapshotName != "vmsnapshot-snap-uid-volume-data" {
		t.Errorf("backup %+v", b)
	}
	if a := b.PersistentVolumeClaim.Annotations; len(a) != 1 || a["user"] != "note" {
		t.Errorf("backed-up claim annotations %v, want only the user's", a)
	}
	l := VolumeLists(c)
	if strings.Join(l.IncludedVolumes, ",") != "data,root" || strings.Join(l.ExcludedVolumes, ",") != "scratch" {
		t.Errorf("volume lists %+v", l)
	}
	vs := VolumeSnapshotFor(c, b, "default")
	if vs.Labels[SnapshotLabel] != s.Name || *vs.Spec.Source.PersistentVolumeClaimName != "data-claim" || *vs.Spec.VolumeSnapshotClassName != "default" {
		t.Errorf("volume snapshot %+v", vs)
	}
}

func TestContentStatus(t *testing.T) {
	_, c := content(t)
	now := metav1.NewTime(time.Unix(1000, 0))
	cut := func(name string, ready bool, errMsg string) *vsv1.VolumeSnapshot {
		vs := &vsv1.VolumeSnapshot{ObjectMeta: metav1.ObjectMeta{Name: name},
			Status: &vsv1.VolumeSnapshotStatus{CreationTime: &now, ReadyToUse: ptr.To(ready)}}
		if errMsg != "" {
			vs.Status.Error = &vsv1.VolumeSnapshotError{Message: ptr.To(errMsg)}
		}
		return vs
	}
	root, data := "vmsnapshot-snap-uid-volume-root", "vmsnapshot-snap-uid-volume-data"
	st := ContentStatus(c, map[string]*vsv1.VolumeSnapshot{root: cut(root, true, "")}, now)
	if st.CreationTime != nil || *st.ReadyToUse || st.Error != nil {
		t.Errorf("one of two cut: %+v", st)
	}
	st = ContentStatus(c, map[string]*vsv1.VolumeSnapshot{root: cut(root, true, ""), data: cut(data, false, "")}, now)
	if st.CreationTime == nil || *st.ReadyToUse || len(st.VolumeSnapshotStatus) != 2 {
		t.Errorf("both cut, one ready: %+v", st)
	}
	c.Status = ContentStatus(c, map[string]*vsv1.VolumeSnapshot{root: cut(root, true, ""), data: cut(data, true, "")}, now)
	if c.Status.CreationTime == nil || !*c.Status.ReadyToUse {
		t.Errorf("both ready: %+v", c.Status)
	}
	st = ContentStatus(c, map[string]*vsv1.VolumeSnapshot{root: cut(root, true, "")}, now)
	if *st.ReadyToUse || st.Error == nil || !strings.Contains(*st.Error.Message, "VolumeSnapshots ("+data+") missing") {
		t.Errorf("one deleted after: %+v", st)
	}
	st = ContentStatus(c, map[string]*vsv1.VolumeSnapshot{root: cut(root, true, ""), data: cut(data, false, "disk full")}, now)
	if *st.ReadyToUse || st.Error == nil || *st.Error.Message != "VolumeSnapshot "+data+" error: disk full" {
		t.Errorf("an error: %+v", st)
	}
}

func TestPlanRestore(t *testing.T) {
	_, c := content(t)
	restore := func(target string, mod func(*snapshotv1.VirtualMachineRestore)) *snapshotv1.VirtualMachineRestore {
		r := &snapshotv1.VirtualMachineRestore{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "r", UID: "r-uid"},
			Spec: snapshotv1.VirtualMachineRestoreSpec{Target: corev1.TypedLocalObjectReference{APIGroup: ptr.To("kubevirt.io"), Kind: "VirtualMachine", Name: target},
				VirtualMachineSnapshotName: "snap"}}
		if mod != nil {
			mod(r)
		}
		return r
	}

	// Into a new VM: stopped, new identity, the restorer's record.
	p, err := PlanRestore(restore("copy", nil), c, nil, `{"username":"restorer"}`)
	if err != nil {
		t.Fatal(err)
	}
	vm := p.VM
	if vm.Name != "copy" || *vm.Spec.RunStrategy != v1.RunStrategyHalted || vm.Spec.Template.Spec.Domain.Firmware.UUID != "" ||
		vm.Spec.Template.Spec.Domain.Devices.Interfaces[0].MacAddress != "" {
		t.Errorf("new VM %s: run strategy %v, firmware %q, MAC %q", vm.Name, *vm.Spec.RunStrategy, vm.Spec.Template.Spec.Domain.Firmware.UUID,
			vm.Spec.Template.Spec.Domain.Devices.Interfaces[0].MacAddress)
	}
	if vm.Annotations[requester.Annotation] != `{"username":"restorer"}` || vm.Annotations["keep"] != "me" || !Restored(restore("copy", nil), vm) {
		t.Errorf("new VM annotations %v", vm.Annotations)
	}
	if len(p.DataVolumes) != 1 || len(p.Claims) != 1 || len(p.Restores) != 2 {
		t.Fatalf("plan: %d DataVolumes, %d claims, %d restores", len(p.DataVolumes), len(p.Claims), len(p.Restores))
	}
	dv := p.DataVolumes[0]
	if dv.Name != "restore-r-uid-root" || dv.Spec.Source.Snapshot == nil || dv.Spec.Source.Snapshot.Name != "vmsnapshot-snap-uid-volume-root" ||
		dv.Spec.PVC == nil || dv.Spec.PVC.VolumeName != "" || dv.Labels[RestoreLabel] != "r" || dv.Annotations[requester.Annotation] == "" {
		t.Errorf("DataVolume %+v", dv)
	}
	if vm.Spec.DataVolumeTemplates[0].Name != dv.Name || vm.Spec.Template.Spec.Volumes[1].DataVolume.Name != dv.Name {
		t.Errorf("the VM's DataVolume is not the restored one: %+v", vm.Spec)
	}
	pvc := p.Claims[0]
	if pvc.Name != "restore-r-uid-data" || pvc.Spec.DataSource == nil || pvc.Spec.DataSource.Kind != "VolumeSnapshot" ||
		pvc.Spec.VolumeName != "" || vm.Spec.Template.Spec.Volumes[2].PersistentVolumeClaim.ClaimName != pvc.Name {
		t.Errorf("claim %+v", pvc)
	}
	if vm.Spec.Template.Spec.Volumes[3].PersistentVolumeClaim.ClaimName != "scratch" {
		t.Error("an excluded volume's claim was changed")
	}

	// Into the source itself: its own identity and run strategy kept.
	target := sourceVM()
	target.Spec.RunStrategy = ptr.To(v1.RunStrategyManual)
	target.Annotations[requester.Annotation] = `{"username":"last-editor"}`
	p, err = PlanRestore(restore("vm", func(r *snapshotv1.VirtualMachineRestore) {
		r.Spec.VolumeRestorePolicy = ptr.To(snapshotv1.VolumeRestorePolicyPrefixTargetName)
		r.Spec.VolumeRestoreOverrides = []snapshotv1.VolumeRestoreOverride{{VolumeName: "data", RestoreName: "mine", Labels: map[string]string{"l": "v"}}}
	}), c, target, `{"username":"restorer"}`)
	if err != nil {
		t.Fatal(err)
	}
	if *p.VM.Spec.RunStrategy != v1.RunStrategyManual || p.VM.Spec.Template.Spec.Domain.Firmware.UUID != "fw" || p.VM.Annotations[requester.Annotation] != `{"username":"last-editor"}` {
		t.Errorf("restored source: run strategy %v, firmware %q, requester %q", *p.VM.Spec.RunStrategy, p.VM.Spec.Template.Spec.Domain.Firmware.UUID, p.VM.Annotations[requester.Annotation])
	}
	if p.DataVolumes[0].Name != "vm-root" || p.Claims[0].Name != "mine" || p.Claims[0].Labels["l"] != "v" {
		t.Errorf("names: %s, %s (labels %v)", p.DataVolumes[0].Name, p.Claims[0].Name, p.Claims[0].Labels)
	}

	// Patches apply to a new VM; they cannot move it.
	p, err = PlanRestore(restore("copy", func(r *snapshotv1.VirtualMachineRestore) {
		r.Spec.Patches = []string{`{"op":"add","path":"/metadata/labels","value":{"patched":"yes"}}`}
	}), c, nil, "")
	if err != nil || p.VM.Labels["patched"] != "yes" {
		t.Errorf("patched VM labels %v, %v", p.VM.Labels, err)
	}
	if _, err := PlanRestore(restore("copy", func(r *snapshotv1.VirtualMachineRestore) {
		r.Spec.Patches = []string{`{"op":"replace","path":"/metadata/namespace","value":"elsewhere"}`}
	}), c, nil, ""); err == nil || !strings.Contains(err.Error(), "spec.patches") {
		t.Errorf("a patch moving the VM to another namespace: %v", err)
	}
	if _, err := PlanRestore(restore("copy", func(r *snapshotv1.VirtualMachineRestore) { r.Spec.Patches = []string{"not json"} }), c, nil, ""); err == nil {
		t.Error("a malformed patch accepted")
	}
}

func TestValidate(t *testing.T) {
	ok := snapshotv1.VirtualMachineRestoreSpec{VirtualMachineSnapshotName: "snap",
		Target: corev1.TypedLocalObjectReference{APIGroup: ptr.To("kubevirt.io"), Kind: "VirtualMachine", Name: "vm"}}
	for _, tc := range []struct {
		name  string
		mod   func(*snapshotv1.VirtualMachineRestoreSpec)
		field string
	}{
		{"valid", func(*snapshotv1.VirtualMachineRestoreSpec) {}, ""},
		{"not a VM", func(s *snapshotv1.VirtualMachineRestoreSpec) { s.Target.Kind = "Pod" }, "spec.target"},
		{"in place", func(s *snapshotv1.VirtualMachineRestoreSpec) {
			s.VolumeRestorePolicy = ptr.To(snapshotv1.VolumeRestorePolicyInPlace)
		}, "spec.volumeRestorePolicy"},
		{"unknown ownership", func(s *snapshotv1.VirtualMachineRestoreSpec) {
			s.VolumeOwnershipPolicy = ptr.To(snapshotv1.VolumeOwnershipPolicy("Mine"))
		}, "spec.volumeOwnershipPolicy"},
		{"no snapshot", func(s *snapshotv1.VirtualMachineRestoreSpec) { s.VirtualMachineSnapshotName = "" }, "spec.target.name and spec.virtualMachineSnapshotName are required"},
	} {
		r := &snapshotv1.VirtualMachineRestore{Spec: *ok.DeepCopy()}
		tc.mod(&r.Spec)
		err := Validate(r)
		if tc.field == "" && err != nil || tc.field != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.field)) {
			t.Errorf("%s: %v, want an error naming %q", tc.name, err, tc.field)
		}
	}
}
