package datavolume

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
)

// event is one event on a DataVolume.
type event struct{ kind, reason, message string }

// operation names what fills a DataVolume, as its event reasons do
// ("Import", "Clone", "Upload"), and where a clone comes from (a claim, or
// a VolumeSnapshot restored).
func operation(dv *cdiv1.DataVolume) (op, src string) {
	s := dv.Spec.Source
	switch {
	case s != nil && s.PVC != nil:
		ns := s.PVC.Namespace
		if ns == "" {
			ns = dv.Namespace
		}
		return "Clone", ns + "/" + s.PVC.Name
	case s != nil && s.Snapshot != nil:
		return "Clone", dv.Namespace + "/" + s.Snapshot.Name
	case s != nil && s.Upload != nil:
		return "Upload", ""
	}
	return "Import", ""
}

// progressNotes are the notes of the phases on the way, %[1]s the claim,
// %[2]s the clone's source, %[3]s the namespace.
var progressNotes = map[cdiv1.DataVolumePhase]string{
	cdiv1.Pending:          "PVC %[1]s Pending",
	cdiv1.ImportScheduled:  "Import into %[1]s scheduled",
	cdiv1.ImportInProgress: "Import into %[1]s in progress",
	cdiv1.CloneScheduled:   "Cloning from %[2]s into %[3]s/%[1]s scheduled",
	cdiv1.CloneInProgress:  "Cloning from %[2]s into %[3]s/%[1]s in progress",
	cdiv1.UploadScheduled:  "Upload into %[1]s scheduled",
	cdiv1.UploadReady:      "Upload into %[1]s ready",
}

// successNotes are the notes of a DataVolume done, by operation.
var successNotes = map[string]string{
	"Import": "Successfully imported into PVC %[1]s",
	"Clone":  "Successfully cloned from %[2]s into %[3]s/%[1]s",
	"Upload": "Successfully uploaded into %[1]s",
}

// phaseEvent is the event CDI's DataVolume controller emits when a
// DataVolume moves from phase from to the phase of st; none when the phase
// did not change. A failure names its cause (the Ready condition's message).
func phaseEvent(dv *cdiv1.DataVolume, from cdiv1.DataVolumePhase, st cdiv1.DataVolumeStatus) (event, bool) {
	if st.Phase == from {
		return event{}, false
	}
	claim := st.ClaimName
	if claim == "" {
		claim = dv.Name
	}
	op, src := operation(dv)
	switch st.Phase {
	case cdiv1.Succeeded:
		return event{corev1.EventTypeNormal, op + "Succeeded", fmt.Sprintf(successNotes[op], claim, src, dv.Namespace)}, true
	case cdiv1.Failed:
		msg := ""
		for _, c := range st.Conditions {
			if c.Type == cdiv1.DataVolumeReady {
				msg = c.Message
			}
		}
		return event{corev1.EventTypeWarning, op + "Failed", fmt.Sprintf("%s into %s failed: %s", op, claim, msg)}, true
	}
	note, ok := progressNotes[st.Phase]
	if !ok {
		return event{}, false
	}
	return event{corev1.EventTypeNormal, string(st.Phase), fmt.Sprintf(note, claim, src, dv.Namespace)}, true
}

// refusedEvent is a warning, as CDI emits for its importer Pod, when the
// run's Pod is newly refused (a ResourceQuota, admission): the Running
// condition's reason and message.
func refusedEvent(old, st cdiv1.DataVolumeStatus) (event, bool) {
	running := func(st cdiv1.DataVolumeStatus) cdiv1.DataVolumeCondition {
		for _, c := range st.Conditions {
			if c.Type == cdiv1.DataVolumeRunning {
				return c
			}
		}
		return cdiv1.DataVolumeCondition{}
	}
	now, was := running(st), running(old)
	if now.Reason != ErrExceededQuotaReason && now.Reason != "PodAdmissionFailed" || now.Reason == was.Reason && now.Message == was.Message {
		return event{}, false
	}
	return event{corev1.EventTypeWarning, now.Reason, now.Message}, true
}
