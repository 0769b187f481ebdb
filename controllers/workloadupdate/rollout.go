package workloadupdate

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
)

// RolledOut says whether the release is installed on every node: the
// handlers' DaemonSet has every Pod of its current template available
// (nil: there is none yet), else why not. Like KubeVirt's updater, which
// waits for the install to be deployed, the updater moves no VMI before:
// a handler restarting for the new release breaks the migrations through
// its node, and its device plugin's restart fails the target Pods placed
// there.
func RolledOut(ds *appsv1.DaemonSet) (bool, string) {
	switch {
	case ds == nil:
		return false, "the node handlers are not installed yet"
	case ds.Status.ObservedGeneration < ds.Generation:
		return false, "the node handlers' new release is not rolled out yet"
	case ds.Status.UpdatedNumberScheduled < ds.Status.DesiredNumberScheduled,
		ds.Status.NumberAvailable < ds.Status.DesiredNumberScheduled,
		ds.Status.NumberUnavailable > 0:
		return false, fmt.Sprintf("the node handlers are rolling out: %d of %d nodes updated, %d available",
			ds.Status.UpdatedNumberScheduled, ds.Status.DesiredNumberScheduled, ds.Status.NumberAvailable)
	}
	return true, ""
}
