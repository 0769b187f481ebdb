package launcher

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"libvirt.org/go/libvirt"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/runtime/agent"
)

// The VMI operations a launcher serves besides start, status, exec and
// stop: the guest agent's reads, pause and unpause, soft reboot, and
// filesystem freeze, each what KubeVirt's subresource of that name does.
const (
	OpGuestInfo      = "guestosinfo"
	OpUserList       = "userlist"
	OpFilesystemList = "filesystemlist"
	OpPause          = "pause"
	OpUnpause        = "unpause"
	OpSoftReboot     = "softreboot"
	OpFreeze         = "freeze"
	OpUnfreeze       = "unfreeze"
)

// Reads are the operations that only read (GET); Changes change the VM
// (PUT).
var (
	Reads   = []string{OpGuestInfo, OpUserList, OpFilesystemList}
	Changes = []string{OpPause, OpUnpause, OpSoftReboot, OpFreeze, OpUnfreeze}
)

// agentTimeout bounds one guest agent call of an operation.
const agentTimeout = 10 * time.Second

// defaultUnfreeze is how long a freeze lasts unless thawed sooner, as
// KubeVirt's default unfreezeTimeout.
const defaultUnfreeze = 5 * time.Minute

// ErrNoAgent answers an operation that needs the guest agent while none
// answers.
var ErrNoAgent = errors.New("the guest agent is not connected")

func (s *server) routeGuest(mux *http.ServeMux) {
	for _, op := range Reads {
		mux.HandleFunc("GET /"+op, s.guestOp(op))
	}
	for _, op := range Changes {
		mux.HandleFunc("PUT /"+op, s.guestOp(op))
	}
}

// guestOp serves one operation: its result as JSON, or the error with 409
// for what the VM's state does not allow and 502 for the guest's failures.
func (s *server) guestOp(op string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), agentTimeout)
		defer cancel()
		out, err := s.do(ctx, op, r)
		switch {
		case errors.Is(err, ErrNoAgent) || errors.Is(err, errState):
			http.Error(w, err.Error(), http.StatusConflict)
		case err != nil:
			http.Error(w, err.Error(), http.StatusBadGateway)
		case out == nil:
			w.WriteHeader(http.StatusNoContent)
		default:
			writeJSON(w, out)
		}
	}
}

// errState marks an operation the domain's state does not allow.
var errState = errors.New("not in a state for this")

func (s *server) do(ctx context.Context, op string, r *http.Request) (any, error) {
	a := s.vm.Agent()
	needsAgent := op != OpPause && op != OpUnpause && op != OpSoftReboot
	if needsAgent && !s.agentConnected() {
		return nil, ErrNoAgent
	}
	f, ok := map[string]func() (any, error){
		OpGuestInfo: func() (any, error) { return s.guestInfo(ctx, a) },
		OpUserList:  func() (any, error) { return userList(ctx, a) },
		OpFilesystemList: func() (any, error) {
			fss, err := filesystems(ctx, a)
			return &v1.VirtualMachineInstanceFileSystemList{Items: fss}, err
		},
		OpPause:      func() (any, error) { return nil, s.vm.Pause() },
		OpUnpause:    func() (any, error) { return nil, s.vm.Resume() },
		OpSoftReboot: func() (any, error) { return nil, s.softReboot(ctx, a) },
		OpFreeze: func() (any, error) {
			unfreeze, err := unfreezeTimeout(r.URL.Query().Get("unfreezeTimeout"))
			if err != nil {
				return nil, err
			}
			return nil, s.freeze(ctx, a, unfreeze)
		},
		OpUnfreeze: func() (any, error) {
			n, err := a.Thaw(ctx)
			if err == nil {
				s.log.Info("guest file systems thawed", "count", n)
			}
			return nil, err
		},
	}[op]
	if !ok {
		return nil, fmt.Errorf("unknown operation %q", op)
	}
	return f()
}

// unfreezeTimeout parses a freeze's unfreezeTimeout ("" is the default).
func unfreezeTimeout(v string) (time.Duration, error) {
	if v == "" {
		return defaultUnfreeze, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%w: unfreezeTimeout %q is not a duration", errState, v)
	}
	return d, nil
}

func (s *server) agentConnected() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.status.AgentConnected
}

// guestInfo is KubeVirt's guestosinfo: what the agent says of itself, the
// OS, its users and filesystems.
func (s *server) guestInfo(ctx context.Context, a *agent.Client) (*v1.VirtualMachineInstanceGuestAgentInfo, error) {
	info, err := a.Describe(ctx)
	if err != nil {
		return nil, err
	}
	out := &v1.VirtualMachineInstanceGuestAgentInfo{GAVersion: info.Version}
	for _, c := range info.Commands {
		out.SupportedCommands = append(out.SupportedCommands, v1.GuestAgentCommandInfo{Name: c.Name, Enabled: c.Enabled})
	}
	if os, err := a.OSInfo(ctx); err == nil {
		out.OS = v1.VirtualMachineInstanceGuestOSInfo{Name: os.Name, KernelRelease: os.KernelRelease, KernelVersion: os.KernelVersion,
			Machine: os.Machine, ID: os.ID, PrettyName: os.PrettyName, Version: os.Version, VersionID: os.VersionID}
	}
	out.Hostname, _ = a.Hostname(ctx)
	if zone, offset, err := a.Timezone(ctx); err == nil {
		out.Timezone = zone + ", " + strconv.Itoa(offset)
	}
	if users, err := userList(ctx, a); err == nil {
		out.UserList = users.Items
	}
	if fss, err := filesystems(ctx, a); err == nil {
		out.FSInfo = v1.VirtualMachineInstanceFileSystemInfo{Filesystems: fss}
	}
	out.FSFreezeStatus, _ = a.FreezeStatus(ctx)
	return out, nil
}

func userList(ctx context.Context, a *agent.Client) (*v1.VirtualMachineInstanceGuestOSUserList, error) {
	users, err := a.Users(ctx)
	if err != nil {
		return nil, err
	}
	out := &v1.VirtualMachineInstanceGuestOSUserList{Items: []v1.VirtualMachineInstanceGuestOSUser{}}
	for _, u := range users {
		out.Items = append(out.Items, v1.VirtualMachineInstanceGuestOSUser{UserName: u.Name, Domain: u.Domain, LoginTime: u.LoginTime})
	}
	return out, nil
}

func filesystems(ctx context.Context, a *agent.Client) ([]v1.VirtualMachineInstanceFileSystem, error) {
	fss, err := a.Filesystems(ctx)
	if err != nil {
		return nil, err
	}
	out := []v1.VirtualMachineInstanceFileSystem{}
	for _, f := range fss {
		fs := v1.VirtualMachineInstanceFileSystem{DiskName: f.Name, MountPoint: f.Mountpoint, FileSystemType: f.Type,
			UsedBytes: f.UsedBytes, TotalBytes: f.TotalBytes}
		for _, d := range f.Disks {
			fs.Disk = append(fs.Disk, v1.VirtualMachineInstanceFileSystemDisk{Serial: d.Serial, BusType: d.BusType})
		}
		out = append(out, fs)
	}
	return out, nil
}

// softReboot reboots the guest without ending the VMI: libvirt's reboot
// presses the ACPI power button and marks the domain to start again in the
// same QEMU once the guest is down. A guest that ignores the button (no
// ACPI daemon) is then asked by its agent to power off, which that mark
// turns into the reboot. (The agent's own reboot is not used: a guest
// whose agent cannot reboot powers off instead, ending the VMI.)
func (s *server) softReboot(ctx context.Context, a *agent.Client) error {
	if s.vm.State() == "paused" {
		return fmt.Errorf("%w: the VMI is paused", errState)
	}
	if err := s.vm.Reboot(); err != nil {
		return err
	}
	if s.agentConnected() {
		// No answer comes once the guest goes down.
		_ = a.Shutdown(ctx)
	}
	return nil
}

// freeze freezes the guest's filesystems and thaws them after unfreeze
// unless an unfreeze comes first, so that a client that never calls it
// does not leave the guest frozen.
func (s *server) freeze(ctx context.Context, a *agent.Client, unfreeze time.Duration) error {
	n, err := a.Freeze(ctx)
	if err != nil {
		return err
	}
	s.log.Info("guest file systems frozen", "count", n, "unfreezeAfter", unfreeze.String())
	if unfreeze > 0 {
		time.AfterFunc(unfreeze, func() {
			tctx, cancel := context.WithTimeout(context.Background(), agentTimeout)
			defer cancel()
			if st, err := a.FreezeStatus(tctx); err == nil && st == "frozen" {
				if _, err := a.Thaw(tctx); err != nil {
					s.log.Error("thawing after the unfreeze timeout", "err", err)
				}
			}
		})
	}
	return nil
}

// Pause suspends the domain's vCPUs.
func (vm *VM) Pause() error {
	if vm.State() == "paused" {
		return fmt.Errorf("%w: VMI is already paused", errState)
	}
	if err := vm.dom.Suspend(); err != nil {
		return fmt.Errorf("pausing the domain: %w", err)
	}
	return nil
}

// Resume resumes a paused domain.
func (vm *VM) Resume() error {
	if vm.State() != "paused" {
		return fmt.Errorf("%w: VMI is not paused", errState)
	}
	if err := vm.dom.Resume(); err != nil {
		return fmt.Errorf("resuming the domain: %w", err)
	}
	return nil
}

// Reboot asks the guest to reboot with an ACPI event.
func (vm *VM) Reboot() error {
	if err := vm.dom.Reboot(libvirt.DOMAIN_REBOOT_ACPI_POWER_BTN); err != nil {
		return fmt.Errorf("rebooting the domain: %w", err)
	}
	return nil
}

// Op runs a launcher operation (Op*) with query (may be empty): a read
// decodes into out. A refusal is an *OpError.
func (c *Client) Op(ctx context.Context, op string, query url.Values, out any) error {
	method := http.MethodPut
	if slices.Contains(Reads, op) {
		method = http.MethodGet
	}
	path := "/" + op
	if len(query) > 0 {
		path += "?" + query.Encode()
	}
	return c.do(ctx, method, path, nil, out)
}
