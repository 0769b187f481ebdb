package launcher

import (
	"testing"

	"libvirt.org/go/libvirt"
)

// TestLifecycleEvents: how libvirt's lifecycle events end a launcher's
// domain, and which say a migration brought it here.
func TestLifecycleEvents(t *testing.T) {
	for _, tc := range []struct {
		name    string
		ev      libvirt.DomainEventLifecycle
		exit    *Exit
		arrived bool
	}{
		{name: "guest shut down", ev: libvirt.DomainEventLifecycle{Event: libvirt.DOMAIN_EVENT_STOPPED, Detail: int(libvirt.DOMAIN_EVENT_STOPPED_SHUTDOWN)},
			exit: &Exit{Reason: "Shutdown", Succeeded: true}},
		{name: "destroyed", ev: libvirt.DomainEventLifecycle{Event: libvirt.DOMAIN_EVENT_STOPPED, Detail: int(libvirt.DOMAIN_EVENT_STOPPED_DESTROYED)},
			exit: &Exit{Reason: "Destroyed"}},
		{name: "moved to the target: the VMI goes on", ev: libvirt.DomainEventLifecycle{Event: libvirt.DOMAIN_EVENT_STOPPED, Detail: int(libvirt.DOMAIN_EVENT_STOPPED_MIGRATED)},
			exit: &Exit{Reason: ReasonMigrated}},
		{name: "crashed", ev: libvirt.DomainEventLifecycle{Event: libvirt.DOMAIN_EVENT_CRASHED}, exit: &Exit{Reason: "Crashed"}},
		{name: "resumed by an incoming migration", ev: libvirt.DomainEventLifecycle{Event: libvirt.DOMAIN_EVENT_RESUMED, Detail: int(libvirt.DOMAIN_EVENT_RESUMED_MIGRATED)}, arrived: true},
		{name: "running on here in post-copy", ev: libvirt.DomainEventLifecycle{Event: libvirt.DOMAIN_EVENT_RESUMED, Detail: int(libvirt.DOMAIN_EVENT_RESUMED_POSTCOPY)}, arrived: true},
		{name: "unpaused by a user", ev: libvirt.DomainEventLifecycle{Event: libvirt.DOMAIN_EVENT_RESUMED, Detail: int(libvirt.DOMAIN_EVENT_RESUMED_UNPAUSED)}},
		{name: "the incoming domain started, paused, not yet here", ev: libvirt.DomainEventLifecycle{Event: libvirt.DOMAIN_EVENT_STARTED, Detail: int(libvirt.DOMAIN_EVENT_STARTED_MIGRATED)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			exit, done := exitOf(&tc.ev)
			if done != (tc.exit != nil) || (done && exit != *tc.exit) {
				t.Errorf("exitOf = %+v, %v; want %+v", exit, done, tc.exit)
			}
			if got := arrivedByMigration(&tc.ev); got != tc.arrived {
				t.Errorf("arrivedByMigration = %v, want %v", got, tc.arrived)
			}
		})
	}
}
