package launcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"libvirt.org/go/libvirt"
	"libvirt.org/go/libvirtxml"

	"github.com/tekvirt/tekvirt/runtime/domain"
	"github.com/tekvirt/tekvirt/runtime/migration"
)

// MigrateRequest asks a source launcher to move its domain to the target
// launcher that the node's handler connected this Pod's loopback to.
type MigrateRequest struct {
	Limits MigrationLimits `json:"limits"`
	// SharedStorageVerified says that every claim the migration leaves in
	// place (not copied) is on storage the provisioner verified every node
	// shares. libvirt cannot tell a directory every node sees from a local
	// one and refuses such a migration as unsafe; it is told not to.
	SharedStorageVerified bool `json:"sharedStorageVerified,omitempty"`
}

// MigrationStatus is how an outgoing migration goes, in the launcher's
// Status while it runs and after it ended.
type MigrationStatus struct {
	// State is "running", "succeeded" or "failed".
	State     string    `json:"state"`
	StartedAt time.Time `json:"startedAt"`
	EndedAt   time.Time `json:"endedAt,omitzero"`
	// Mode is KubeVirt's migration mode: "PreCopy", or "PostCopy" once
	// switched.
	Mode string `json:"mode"`
	// Failure says why a migration failed.
	Failure string `json:"failure,omitempty"`
	// Aborted is set when the launcher (a timeout) or the handler (a
	// cancel) aborted it.
	Aborted bool `json:"aborted,omitempty"`
	// Processed and Remaining are libvirt's job counters, memory and disks.
	Processed uint64 `json:"processed"`
	Remaining uint64 `json:"remaining"`
}

// Migration states.
const (
	MigrationRunning   = "running"
	MigrationSucceeded = "succeeded"
	MigrationFailed    = "failed"
)

// jobPoll is how often a running migration's progress is read.
const jobPoll = 500 * time.Millisecond

// outgoing is the one migration a launcher may run at a time.
type outgoing struct {
	mu     sync.Mutex
	status *MigrationStatus
	abort  func(reason string)
}

func (o *outgoing) get() *MigrationStatus {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.status == nil {
		return nil
	}
	st := *o.status
	return &st
}

// migrationEndWait is how long a launcher whose domain left waits for the
// outcome of the migration that runs.
const migrationEndWait = 30 * time.Second

// ended is the migration's status once it is no longer running, waiting
// up to timeout for it to end (nil: no migration ran).
func (o *outgoing) ended(ctx context.Context, timeout time.Duration) *MigrationStatus {
	deadline := time.Now().Add(timeout)
	for {
		st := o.get()
		if st == nil || st.State != MigrationRunning || time.Now().After(deadline) {
			return st
		}
		select {
		case <-ctx.Done():
			return st
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// cancel aborts the running migration, saying why.
func (o *outgoing) cancel(reason string) {
	o.mu.Lock()
	abort := o.abort
	o.mu.Unlock()
	if abort != nil {
		abort(reason)
	}
}

func (o *outgoing) update(f func(*MigrationStatus)) {
	o.mu.Lock()
	defer o.mu.Unlock()
	f(o.status)
}

// errMigrating refuses a second migration.
var errMigrating = errors.New("a migration of this VMI is already running")

// start begins migrating vm unless one runs or ran to success.
func (o *outgoing) start(vm *VM, req MigrateRequest, log *slog.Logger) error {
	o.mu.Lock()
	if o.status != nil && o.status.State != MigrationFailed {
		o.mu.Unlock()
		return errMigrating
	}
	o.status = &MigrationStatus{State: MigrationRunning, StartedAt: time.Now().UTC(), Mode: "PreCopy"}
	abortc := make(chan string, 1)
	o.abort = func(reason string) {
		select {
		case abortc <- reason:
		default:
		}
	}
	o.mu.Unlock()
	go o.run(vm, req, abortc, log)
	return nil
}

// run migrates and watches the job until it ends.
func (o *outgoing) run(vm *VM, req MigrateRequest, abortc <-chan string, log *slog.Logger) {
	done := make(chan error, 1)
	params, flags, total, err := vm.migrationParams(req)
	if err == nil {
		// The disks copied name what the target gets by block migration;
		// claims (shared) are not among them.
		log.Info("live migration started", "copiedDisks", strings.Join(params.MigrateDisks, ","), "bytes", total)
		go func() { done <- vm.dom.MigrateToURI3(vm.peerURI(), params, flags) }()
	} else {
		done <- err
	}
	r := &migrationRun{o: o, vm: vm, req: req, log: log, mon: newMonitor(req.Limits, time.Now(), total), downtimeSet: req.Limits.MaxDowntimeMs == 0}
	tick := time.NewTicker(jobPoll)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			r.finish(err)
			return
		case reason := <-abortc:
			r.aborted = reason
			_ = vm.dom.AbortJob()
		case <-tick.C:
			r.look()
		}
	}
}

// migrationRun is what run keeps of one outgoing migration.
type migrationRun struct {
	o   *outgoing
	vm  *VM
	req MigrateRequest
	log *slog.Logger
	mon *monitor
	// aborted is why the migration was aborted (empty: it was not).
	aborted string
	// paused: the guest was paused so that the migration ends.
	paused      bool
	downtimeSet bool
}

// finish records how the migration ended; a guest paused for a migration
// that failed runs on here.
func (r *migrationRun) finish(err error) {
	if err != nil && r.paused {
		_ = r.vm.dom.Resume()
	}
	r.o.update(func(st *MigrationStatus) {
		st.EndedAt = time.Now().UTC()
		if err == nil {
			st.State, st.Remaining = MigrationSucceeded, 0
			return
		}
		st.State, st.Failure = MigrationFailed, "Live migration failed: "+libvirtMessage(err)
		if r.aborted != "" {
			st.Aborted, st.Failure = true, r.aborted
		}
	})
}

// look reads the job's progress and does what the monitor says.
func (r *migrationRun) look() {
	job, err := r.vm.dom.GetJobStats(0)
	if err != nil || job.Type == libvirt.DOMAIN_JOB_NONE {
		return
	}
	if !r.downtimeSet {
		// libvirt takes it once the job runs.
		r.downtimeSet = r.vm.dom.MigrateSetMaxDowntime(r.req.Limits.MaxDowntimeMs, 0) == nil
	}
	remaining := job.DataRemaining + job.DiskRemaining
	r.o.update(func(st *MigrationStatus) { st.Processed, st.Remaining = job.DataProcessed+job.DiskProcessed, remaining })
	switch v, reason := r.mon.judge(time.Now(), remaining); v {
	case abort:
		if r.aborted == "" {
			r.aborted = reason
			_ = r.vm.dom.AbortJob()
		}
	case pauseGuest:
		// The target resumes it when it takes over.
		r.paused = r.vm.dom.Suspend() == nil
		r.log.Info("guest paused so that its migration ends (allowWorkloadDisruption)", "paused", r.paused)
	case startPostCopy:
		err := r.vm.dom.MigrateStartPostCopy(0)
		r.log.Info("migration switched to post-copy (allowPostCopy)", "err", err)
		if err == nil {
			r.o.update(func(st *MigrationStatus) { st.Mode = "PostCopy" })
		}
	}
}

// migrationParams are libvirt's parameters for a peer-to-peer live
// migration through the Pod's loopback: the memory stream and the block
// migration of local disks to their ports there, the same addresses the
// target's QEMU listens on in its own Pod. total is the memory and local
// disk to move, for the completion timeout.
func (vm *VM) migrationParams(req MigrateRequest) (*libvirt.DomainMigrateParameters, libvirt.DomainMigrateFlags, uint64, error) {
	xml, err := vm.dom.GetXMLDesc(0)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("reading the domain: %w", err)
	}
	def := &libvirtxml.Domain{}
	if err := def.Unmarshal(xml); err != nil {
		return nil, 0, 0, fmt.Errorf("reading the domain: %w", err)
	}
	info, err := vm.dom.GetInfo()
	if err != nil {
		return nil, 0, 0, fmt.Errorf("reading the domain: %w", err)
	}
	total := info.MaxMem * 1024
	params := &libvirt.DomainMigrateParameters{
		URISet: true, URI: migration.Memory.URI(),
		ListenAddressSet: true, ListenAddress: "127.0.0.1",
	}
	flags := libvirt.MIGRATE_LIVE | libvirt.MIGRATE_PEER2PEER | libvirt.MIGRATE_ABORT_ON_ERROR
	if disks := domain.LocalDisks(vm.vmi, def); len(disks) > 0 {
		params.MigrateDisksSet, params.MigrateDisks = true, disks
		params.DisksURISet, params.DisksURI = true, migration.Disks.URI()
		flags |= libvirt.MIGRATE_NON_SHARED_INC
		for _, d := range disks {
			if bi, err := vm.dom.GetBlockInfo(d, 0); err == nil {
				total += bi.Allocation
			}
		}
	}
	if req.Limits.BandwidthMiB > 0 {
		params.BandwidthSet, params.Bandwidth = true, req.Limits.BandwidthMiB
	}
	if req.SharedStorageVerified {
		flags |= libvirt.MIGRATE_UNSAFE
	}
	if req.Limits.AllowAutoConverge {
		flags |= libvirt.MIGRATE_AUTO_CONVERGE
	}
	if req.Limits.AllowPostCopy {
		flags |= libvirt.MIGRATE_POSTCOPY
	}
	return params, flags, total, nil
}

// peerURI is the target launcher's libvirtd as the source's reaches it:
// through the handler's proxy on this Pod's loopback.
func (vm *VM) peerURI() string {
	kind := "session"
	if strings.HasPrefix(vm.uri, "qemu:///system") {
		kind = "system"
	}
	return "qemu+tcp://" + migration.Libvirt.Addr() + "/" + kind
}

// libvirtMessage is a libvirt error's message without its codes.
func libvirtMessage(err error) string {
	var lerr libvirt.Error
	if errors.As(err, &lerr) {
		return lerr.Message
	}
	return err.Error()
}

// receive makes the launcher a live migration's target: the Libvirt
// stream's port on the Pod's loopback leads to its libvirtd (the source's
// libvirtd reaches it there, through the handlers), TargetReadyFile says
// so, and it waits for the domain to arrive and run. It returns nil, nil
// when ctx ends first (the Pod was stopped: no VM ran here).
func receive(ctx context.Context, dir string, spec *Spec, pod *Pod, log *slog.Logger) (*VM, error) {
	vm, err := watch(spec.URI, spec.VMI)
	if err != nil {
		return nil, err
	}
	undefine, err := vm.defineIncoming(spec.Options)
	if err != nil {
		vm.Close()
		return nil, err
	}
	defer undefine()
	l, err := net.Listen("tcp", migration.Libvirt.Addr())
	if err != nil {
		vm.Close()
		return nil, fmt.Errorf("listening for the migration's libvirt connection: %w", err)
	}
	defer l.Close()
	sock := (&Libvirtd{RunDir: pod.LibvirtdDir}).socket()
	go migration.Forward(l, func() (net.Conn, error) { return net.Dial("unix", sock) })
	if err := writeAtomic(filepath.Join(dir, TargetReadyFile), []byte("ready\n")); err != nil {
		vm.Close()
		return nil, err
	}
	log.Info("waiting for the incoming migration", "domain", domain.Name(spec.VMI))
	if err := vm.awaitArrival(ctx); err != nil {
		vm.Close()
		if ctx.Err() != nil {
			return nil, nil
		}
		return nil, err
	}
	go logCompletedJob(vm.dom, log)
	if err := refreshLinks(vm.dom, linksToRefresh(spec.VMI), log); err != nil {
		// The guest keeps the old Pod's address until it asks DHCP again.
		log.Error("refreshing the guest's links after the migration", "err", err)
	}
	return vm, nil
}

// defineIncoming defines the domain an incoming migration brings when
// some of its disks go to libvirt as descriptors (claims: see create):
// libvirt looks the descriptors up on the domain the migration lands in,
// so that domain must exist, defined with them, before. The returned func
// undefines it again: once arrived it runs transient, as on the source.
func (vm *VM) defineIncoming(opts domain.Options) (func(), error) {
	files, err := openFDGroups(opts)
	if err != nil {
		return nil, err
	}
	defer closeAll(files)
	if len(files) == 0 {
		return func() {}, nil
	}
	def, err := domain.Convert(vm.vmi, opts)
	if err != nil {
		return nil, err
	}
	xml, err := def.Marshal()
	if err != nil {
		return nil, fmt.Errorf("encoding domain %s: %w", def.Name, err)
	}
	dom, err := vm.conn.DomainDefineXML(xml)
	if err != nil {
		return nil, fmt.Errorf("defining domain %s for the incoming migration: %w", def.Name, err)
	}
	if err := associate(dom, files); err != nil {
		_ = dom.Undefine()
		_ = dom.Free()
		return nil, err
	}
	return func() {
		_ = dom.Undefine()
		_ = dom.Free()
	}, nil
}

// logCompletedJob logs QEMU's own figures of the migration that brought
// dom here, which libvirt keeps on the target once it finished the
// migration, a moment after the domain resumed: what `virsh domjobinfo
// --completed` shows (make bench reads them).
func logCompletedJob(dom *libvirt.Domain, log *slog.Logger) {
	for range 20 {
		st, err := dom.GetJobStats(libvirt.DOMAIN_JOB_STATS_COMPLETED)
		if err == nil && st.DowntimeSet {
			log.Info("incoming migration completed", "elapsedMs", st.TimeElapsed, "downtimeMs", st.Downtime, "dataTotalBytes", st.DataTotal)
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
	log.Info("incoming migration completed; libvirt kept no figures of it")
}

// awaitArrival waits for the domain to arrive by migration and run. A
// migration that failed leaves nothing here: the wait goes on for the
// next, until ctx ends.
func (vm *VM) awaitArrival(ctx context.Context) error {
	name := domain.Name(vm.vmi)
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-vm.arrived:
			dom, err := vm.conn.LookupDomainByName(name)
			if err != nil {
				continue // gone again
			}
			if state, _, err := dom.GetState(); err != nil || state != libvirt.DOMAIN_RUNNING {
				_ = dom.Free()
				continue
			}
			vm.dom = dom
			return nil
		}
	}
}
