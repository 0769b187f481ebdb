package vm

import (
	v1 "kubevirt.io/api/core/v1"
)

// The VM's status.stateChangeRequests are how the start, stop and restart
// subresources ask for what the run strategy alone would not do: Start (a
// Manual VM, or a restart's second half) and Stop of the VMI with a given
// UID. The controller acts on the first request only and drops it once
// done, as KubeVirt's does.

// stopRequested reports whether the first request stops vmi.
func stopRequested(reqs []v1.VirtualMachineStateChangeRequest, vmi *v1.VirtualMachineInstance) bool {
	if len(reqs) == 0 || vmi == nil || reqs[0].Action != v1.StopRequest {
		return false
	}
	return reqs[0].UID == nil || *reqs[0].UID == vmi.UID
}

// startRequested reports whether the first request is a start.
func startRequested(reqs []v1.VirtualMachineStateChangeRequest) bool {
	return len(reqs) > 0 && reqs[0].Action == v1.StartRequest
}

// doneRequests drops the leading requests that vmi (nil: there is none)
// shows done: a stop once no VMI, or another than the one it named, runs;
// a start once a VMI exists that has not ended and is not being deleted.
func doneRequests(reqs []v1.VirtualMachineStateChangeRequest, vmi *v1.VirtualMachineInstance) []v1.VirtualMachineStateChangeRequest {
	for len(reqs) > 0 {
		r := reqs[0]
		switch {
		case r.Action == v1.StopRequest && (vmi == nil || (r.UID != nil && *r.UID != vmi.UID)):
		case r.Action == v1.StartRequest && vmi != nil && vmi.DeletionTimestamp == nil && !finished(vmi):
		case r.Action != v1.StopRequest && r.Action != v1.StartRequest:
			// Not ours to act on (KubeVirt's hotplug requests): dropped, as a
			// request that stays first would block every later one.
		default:
			return reqs
		}
		reqs = reqs[1:]
	}
	return nil
}
