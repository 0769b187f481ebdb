package launcher

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"libvirt.org/go/libvirt"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/runtime/agent"
	"github.com/tekvirt/tekvirt/runtime/diskfile"
	"github.com/tekvirt/tekvirt/runtime/domain"
)

// Exit says how a domain ended.
type Exit struct {
	// Reason is the libvirt lifecycle event detail, e.g. "Shutdown", "Crashed".
	Reason string `json:"reason"`
	// Succeeded is true for a guest-initiated shutdown, the VMI's Succeeded phase.
	Succeeded bool `json:"succeeded"`
}

var eventLoop sync.Once

// startEventLoop runs libvirt's default event loop, which lifecycle
// callbacks need, once per process.
func startEventLoop() error {
	var err error
	eventLoop.Do(func() {
		if err = libvirt.EventRegisterDefaultImpl(); err != nil {
			return
		}
		go func() {
			for {
				if libvirt.EventRunDefaultImpl() != nil {
					time.Sleep(100 * time.Millisecond)
				}
			}
		}()
	})
	return err
}

// VM is a running domain.
type VM struct {
	conn  *libvirt.Connect
	dom   *libvirt.Domain
	cb    int
	ended chan Exit
	// arrived signals an incoming migration that resumed the domain here.
	arrived chan struct{}
	// uri is the libvirtd's, vmi what the domain runs.
	uri string
	vmi *v1.VirtualMachineInstance
	// out is the migration of the domain to another launcher.
	out outgoing
	// disks caches Disks: only AttachDisk and DetachDisk change the
	// domain's disks, and the status the handler polls reports them.
	disks diskCache
}

// Start starts vmi as a transient domain on the libvirt at uri.
func Start(uri string, vmi *v1.VirtualMachineInstance, opts domain.Options) (*VM, error) {
	def, err := domain.Convert(vmi, opts)
	if err != nil {
		return nil, err
	}
	xml, err := def.Marshal()
	if err != nil {
		return nil, fmt.Errorf("encoding domain %s: %w", def.Name, err)
	}
	vm, err := watch(uri, vmi)
	if err != nil {
		return nil, err
	}
	if vm.dom, err = create(vm.conn, xml, opts); err != nil {
		vm.Close()
		return nil, fmt.Errorf("starting domain %s: %w", def.Name, err)
	}
	return vm, nil
}

// watch connects to the libvirt at uri and follows the lifecycle events
// of vmi's domain: how it ends, and an incoming migration resuming it.
func watch(uri string, vmi *v1.VirtualMachineInstance) (*VM, error) {
	if err := startEventLoop(); err != nil {
		return nil, fmt.Errorf("starting the libvirt event loop: %w", err)
	}
	conn, err := libvirt.NewConnect(uri)
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", uri, err)
	}
	name := domain.Name(vmi)
	vm := &VM{conn: conn, ended: make(chan Exit, 1), arrived: make(chan struct{}, 1), uri: uri, vmi: vmi}
	vm.cb, err = conn.DomainEventLifecycleRegister(nil, func(_ *libvirt.Connect, d *libvirt.Domain, ev *libvirt.DomainEventLifecycle) {
		if n, _ := d.GetName(); n != name {
			return
		}
		if arrivedByMigration(ev) {
			select {
			case vm.arrived <- struct{}{}:
			default:
			}
			return
		}
		if exit, done := exitOf(ev); done {
			select {
			case vm.ended <- exit:
			default:
			}
		}
	})
	if err != nil {
		_, _ = conn.Close()
		return nil, fmt.Errorf("watching domain events: %w", err)
	}
	return vm, nil
}

// create starts the domain. Disks in a tenant's volume go to libvirt as
// descriptors this process opened (diskfile.Open), which libvirt can only
// attach to a defined domain: such a domain is defined, given them,
// started and undefined again, so that it is as transient as the others.
func create(conn *libvirt.Connect, xml string, opts domain.Options) (*libvirt.Domain, error) {
	files, err := openFDGroups(opts)
	if err != nil {
		return nil, err
	}
	defer closeAll(files)
	if len(files) == 0 {
		return conn.DomainCreateXML(xml, libvirt.DOMAIN_NONE)
	}
	dom, err := conn.DomainDefineXML(xml)
	if err != nil {
		return nil, err
	}
	defer func() { _ = dom.Undefine() }()
	if err := associate(dom, files); err != nil {
		return nil, err
	}
	if err := dom.Create(); err != nil {
		return nil, err
	}
	return dom, nil
}

// openFDGroups opens the disks opts passes to libvirt as descriptors, by
// their fdgroup.
func openFDGroups(opts domain.Options) (map[string]*os.File, error) {
	files := map[string]*os.File{}
	for _, v := range opts.Volumes {
		if v.FDGroup == "" {
			continue
		}
		f, err := diskfile.Open(filepath.Dir(v.Path), filepath.Base(v.Path), !v.ReadOnly)
		if err != nil {
			closeAll(files)
			return nil, err
		}
		files[v.FDGroup] = f
	}
	return files, nil
}

// associate gives dom the descriptors (libvirt holds its own copies).
func associate(dom *libvirt.Domain, files map[string]*os.File) error {
	for group, f := range files {
		if err := dom.FDAssociate(group, []os.File{*f}, 0); err != nil {
			return fmt.Errorf("passing the disk %s: %w", f.Name(), err)
		}
	}
	return nil
}

func closeAll(files map[string]*os.File) {
	for _, f := range files {
		f.Close()
	}
}

// Shutdown asks the guest to power off: an ACPI power button press, and
// the agent's guest-shutdown for guests that ignore it.
func (vm *VM) Shutdown(ctx context.Context) error {
	err := vm.dom.Shutdown()
	if err != nil && !isGone(err) {
		return fmt.Errorf("shutting down: %w", err)
	}
	_ = vm.Agent().Shutdown(ctx)
	return nil
}

// Destroy stops the domain at once.
func (vm *VM) Destroy() error {
	if err := vm.dom.Destroy(); err != nil && !isGone(err) {
		return fmt.Errorf("destroying domain: %w", err)
	}
	return nil
}

// State is the domain's libvirt state, e.g. "running".
func (vm *VM) State() string {
	state, _, err := vm.dom.GetState()
	if err != nil {
		if isGone(err) {
			return "gone"
		}
		return "unknown"
	}
	return map[libvirt.DomainState]string{
		libvirt.DOMAIN_RUNNING: "running", libvirt.DOMAIN_PAUSED: "paused", libvirt.DOMAIN_SHUTDOWN: "shutting down",
		libvirt.DOMAIN_SHUTOFF: "shutoff", libvirt.DOMAIN_CRASHED: "crashed", libvirt.DOMAIN_BLOCKED: "running",
		libvirt.DOMAIN_PMSUSPENDED: "suspended",
	}[state]
}

// Stats reads the domain's memory and CPU use from libvirt.
func (vm *VM) Stats() (*Stats, error) {
	info, err := vm.dom.GetInfo()
	if err != nil {
		return nil, fmt.Errorf("domain info: %w", err)
	}
	st := &Stats{MemoryDomainBytes: info.MaxMem * 1024, CPUSeconds: float64(info.CpuTime) / 1e9}
	mem, err := vm.dom.MemoryStats(uint32(libvirt.DOMAIN_MEMORY_STAT_NR), 0)
	if err != nil {
		return nil, fmt.Errorf("domain memory stats: %w", err)
	}
	for _, m := range mem {
		if m.Tag == int32(libvirt.DOMAIN_MEMORY_STAT_RSS) {
			st.MemoryResidentBytes = m.Val * 1024
		}
	}
	vcpus, err := vm.dom.GetVcpus()
	if err != nil {
		return nil, fmt.Errorf("domain vCPUs: %w", err)
	}
	for _, v := range vcpus {
		st.VCPUs = append(st.VCPUs, VCPUStats{ID: int(v.Number), State: vcpuState(v.State), Seconds: float64(v.CpuTime) / 1e9})
	}
	return st, nil
}

// vcpuState names a libvirt vCPU state as KubeVirt's metrics do.
func vcpuState(s int32) string {
	switch libvirt.VcpuState(s) {
	case libvirt.VCPU_RUNNING:
		return "running"
	case libvirt.VCPU_BLOCKED:
		return "blocked"
	default:
		return "offline"
	}
}

// Agent returns a guest agent client that goes through libvirt, which owns
// the agent channel of the domains it runs.
func (vm *VM) Agent() *agent.Client { return agent.New(libvirtAgent{vm.dom}) }

// Wait returns when the domain ends, or moved to another launcher;
// cancelling ctx destroys it.
func (vm *VM) Wait(ctx context.Context) (Exit, error) {
	exit, err := wait(ctx, vm.dom, vm.ended)
	if err == nil && exit.Reason == "Gone" {
		// The domain may leave before libvirt's migration call returns:
		// its outcome says whether it moved.
		if st := vm.out.ended(ctx, migrationEndWait); st != nil && st.State == MigrationSucceeded {
			exit = Exit{Reason: ReasonMigrated}
		}
	}
	return exit, err
}

// Close releases the libvirt handles; a running domain keeps running.
func (vm *VM) Close() {
	if vm.dom != nil {
		_ = vm.dom.Free()
	}
	_ = vm.conn.DomainEventDeregister(vm.cb)
	_, _ = vm.conn.Close()
}

// libvirtAgent sends agent commands with virDomainQemuAgentCommand.
type libvirtAgent struct{ dom *libvirt.Domain }

func (a libvirtAgent) Command(ctx context.Context, cmd []byte) ([]byte, error) {
	timeout := libvirt.DOMAIN_QEMU_AGENT_COMMAND_DEFAULT
	if dl, ok := ctx.Deadline(); ok {
		timeout = libvirt.DomainQemuAgentCommandTimeout(max(1, int(time.Until(dl).Seconds())))
	}
	out, err := a.dom.QemuAgentCommand(string(cmd), timeout, 0)
	return []byte(out), err
}

// wait returns when the domain ends, polling its state too in case an
// event was missed.
func wait(ctx context.Context, dom *libvirt.Domain, ended <-chan Exit) (Exit, error) {
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		select {
		case e := <-ended:
			return e, nil
		case <-ctx.Done():
			if err := dom.Destroy(); err != nil && !isGone(err) {
				return Exit{}, fmt.Errorf("destroying domain: %w", err)
			}
			return Exit{Reason: "Destroyed"}, nil
		case <-tick.C:
			state, _, err := dom.GetState()
			if isGone(err) || (err == nil && (state == libvirt.DOMAIN_SHUTOFF || state == libvirt.DOMAIN_CRASHED)) {
				select {
				case e := <-ended:
					return e, nil
				default:
					return Exit{Reason: "Gone"}, nil
				}
			}
		}
	}
}

func isGone(err error) bool {
	var lerr libvirt.Error
	return errors.As(err, &lerr) && lerr.Code == libvirt.ERR_NO_DOMAIN
}

// ReasonMigrated is the Exit of a source launcher whose domain moved to
// its target: the VMI did not end.
const ReasonMigrated = "Migrated"

// arrivedByMigration is the event of a domain an incoming migration
// resumed here (pre-copy done, or running on in post-copy).
func arrivedByMigration(ev *libvirt.DomainEventLifecycle) bool {
	if ev.Event != libvirt.DOMAIN_EVENT_RESUMED {
		return false
	}
	d := libvirt.DomainEventResumedDetailType(ev.Detail)
	return d == libvirt.DOMAIN_EVENT_RESUMED_MIGRATED || d == libvirt.DOMAIN_EVENT_RESUMED_POSTCOPY
}

// exitOf maps a lifecycle event to how the domain ended, if it did.
func exitOf(ev *libvirt.DomainEventLifecycle) (Exit, bool) {
	switch ev.Event {
	case libvirt.DOMAIN_EVENT_STOPPED:
		switch libvirt.DomainEventStoppedDetailType(ev.Detail) {
		case libvirt.DOMAIN_EVENT_STOPPED_SHUTDOWN:
			return Exit{Reason: "Shutdown", Succeeded: true}, true
		case libvirt.DOMAIN_EVENT_STOPPED_DESTROYED:
			return Exit{Reason: "Destroyed"}, true
		case libvirt.DOMAIN_EVENT_STOPPED_CRASHED:
			return Exit{Reason: "Crashed"}, true
		case libvirt.DOMAIN_EVENT_STOPPED_FAILED:
			return Exit{Reason: "Failed"}, true
		case libvirt.DOMAIN_EVENT_STOPPED_MIGRATED:
			// The VM runs on in the target launcher.
			return Exit{Reason: ReasonMigrated}, true
		default:
			return Exit{Reason: fmt.Sprintf("Stopped (detail %d)", ev.Detail)}, true
		}
	case libvirt.DOMAIN_EVENT_CRASHED:
		return Exit{Reason: "Crashed"}, true
	}
	return Exit{}, false
}
