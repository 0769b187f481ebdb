package launcher

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/tekvirt/tekvirt/contracts/podnetwork"
	"github.com/tekvirt/tekvirt/runtime/domain"
)

// specPoll is how often a launcher Pod looks for its spec (a stat of one
// file): a VM's start and a migration's target wait for it.
const specPoll = 50 * time.Millisecond

// defaultGrace is KubeVirt's terminationGracePeriodSeconds default.
const defaultGrace = 180 * time.Second

// Main runs the VM of a launcher Pod until its domain ends: it starts a
// libvirtd of its own in the Pod once the node's handler wrote the
// prelude in dir, waits for the spec the handler writes once it prepared
// the VM, starts the domain on that libvirtd, answers the handler on
// dir/launcher.sock, and writes dir/exit.json with how the domain ended.
// Cancelling ctx (SIGTERM) shuts the guest down within its termination
// grace period; a Pod stopped (or a launch cancelled) before the spec came
// ends without error.
func Main(ctx context.Context, dir string, pod *Pod, log *slog.Logger) error {
	nsCtx, stopNS := context.WithCancel(ctx)
	defer stopNS()
	go func() {
		if err := serveNetNS(nsCtx, dir, log); err != nil {
			log.Error("serving the network namespace", "err", err)
		}
	}()
	spec, lv, err := awaitVM(ctx, dir, pod, log)
	if spec == nil || err != nil {
		if err == nil {
			log.Info("stopped before the VM was prepared")
		}
		return err
	}
	defer lv.stop()
	dhcpCtx, stopDHCP := context.WithCancel(context.Background())
	defer stopDHCP()
	if err := serveDHCP(dhcpCtx, spec, log); err != nil {
		return errors.Join(err, writeExit(dir, Exit{Reason: "Failed: " + err.Error()}))
	}
	start := time.Now()
	vm, err := run(ctx, dir, spec, pod, log)
	if err != nil {
		return errors.Join(err, writeExit(dir, Exit{Reason: "Failed: " + err.Error()}))
	}
	if vm == nil {
		log.Info("stopped before the incoming migration arrived")
		return nil
	}
	defer vm.Close()
	log.Info("domain started", "domain", spec.VMI.Namespace+"_"+spec.VMI.Name, "incoming", spec.Incoming, "took", time.Since(start).Round(time.Millisecond).String())
	lv.warm.report(log)
	srv := newSpecServer(vm, spec, log)
	serveCtx, stopServing := context.WithCancel(context.Background())
	defer stopServing()
	go func() {
		if err := srv.serve(serveCtx, filepath.Join(dir, SocketFile)); err != nil {
			log.Error("serving the handler", "err", err)
		}
	}()
	go srv.pollGuest(serveCtx)
	go func() {
		<-ctx.Done()
		srv.stop(grace(spec))
	}()
	exit, err := vm.Wait(context.Background())
	if err != nil {
		exit = Exit{Reason: "Failed: " + err.Error()}
	}
	if srv.stopRequested() {
		exit.Succeeded = true
	}
	log.Info("domain ended", "reason", exit.Reason, "succeeded", exit.Succeeded)
	return writeExit(dir, exit)
}

// awaitVM starts the Pod's libvirtd once the prelude came, while the
// handler prepares the VM, and returns it with the spec once that came
// (nil, nil, nil: the Pod was stopped or the launch cancelled first).
func awaitVM(ctx context.Context, dir string, pod *Pod, log *slog.Logger) (*Spec, *daemon, error) {
	prelude, err := awaitPrelude(ctx, dir, specPoll)
	if prelude == nil || err != nil {
		return nil, nil, err
	}
	lv, err := pod.startDaemon(ctx, prelude, log)
	if err != nil {
		return nil, nil, errors.Join(err, writeExit(dir, Exit{Reason: "Failed: " + err.Error()}))
	}
	spec, err := loadSpec(ctx, dir)
	if spec == nil || err != nil {
		lv.stop()
		return nil, nil, err
	}
	// The kubelet put the PCI devices that device plugins allocated to
	// this container in its environment.
	spec.Options.PCIDevices = domain.PCIDevicesFromEnv(spec.VMI, os.Getenv)
	pod.claimPaths(spec)
	spec.URI = lv.uri
	return spec, lv, nil
}

// run starts the spec's domain, or, for a migration's target, receives it
// (nil, nil: the Pod was stopped before it came).
func run(ctx context.Context, dir string, spec *Spec, pod *Pod, log *slog.Logger) (*VM, error) {
	if spec.Incoming {
		return receive(ctx, dir, spec, pod, log)
	}
	return Start(spec.URI, spec.VMI, spec.Options)
}

// newSpecServer is the server of vm, with what the spec says of the
// guest's credentials and interfaces.
func newSpecServer(vm *VM, spec *Spec, log *slog.Logger) *server {
	srv := newServer(vm, log)
	if len(spec.VMI.Spec.AccessCredentials) > 0 {
		srv.creds = newCredentials(spec.VMI)
	}
	srv.guest = guestAddress(spec.Options)
	srv.podIPs = podIPs(spec.Options)
	srv.macs = map[string]string{}
	for name, iface := range spec.Options.Interfaces {
		srv.macs[name] = iface.MAC
	}
	return srv
}

// GuestPort is a port of the guest a port-forward stream leads to.
type GuestPort struct {
	Protocol string // "tcp" or "udp"
	Port     int32
}

// podIPs are the addresses of the Pod's interface (the one its CNI plugin
// made), but link-local ones; a bridge binding took them for its guest, so
// they are its interface's then.
func podIPs(opts domain.Options) []string {
	var out []string
	for _, iface := range opts.Interfaces {
		if iface.Binding == domain.BindingBridge && !iface.Secondary {
			out = append(out, iface.Address.Addr().String())
		}
	}
	if len(out) > 0 {
		return out
	}
	pod, err := net.InterfaceByName(podnetwork.PodInterface)
	if err != nil {
		return nil
	}
	addrs, err := pod.Addrs()
	if err != nil {
		return nil
	}
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok || ipn.IP.IsLoopback() || ipn.IP.IsLinkLocalUnicast() {
			continue
		}
		out = append(out, ipn.IP.String())
	}
	return out
}

// Pod is how a launcher Pod is laid out.
type Pod struct {
	// LibvirtdDir is the run directory of the Pod's own libvirtd.
	LibvirtdDir string
	// DisksDir holds each claim volume's mount, DisksDir/<volume>; the spec
	// names the files as the node sees them.
	DisksDir string
}

// claimPaths points the spec's claim volumes at their mounts in the Pod.
func (p *Pod) claimPaths(spec *Spec) {
	if p.DisksDir == "" {
		return
	}
	for _, vol := range spec.VMI.Spec.Volumes {
		v, ok := spec.Options.Volumes[vol.Name]
		if ok && (vol.PersistentVolumeClaim != nil || vol.DataVolume != nil) {
			v.Path = filepath.Join(p.DisksDir, vol.Name, filepath.Base(v.Path))
			spec.Options.Volumes[vol.Name] = v
		}
	}
}

// loadSpec waits for the spec; it returns nil, nil when ctx ends first.
func loadSpec(ctx context.Context, dir string) (*Spec, error) {
	spec, err := AwaitSpec(ctx, dir, specPoll)
	if err != nil && ctx.Err() != nil {
		return nil, nil
	}
	return spec, err
}

func grace(spec *Spec) time.Duration {
	if g := spec.VMI.Spec.TerminationGracePeriodSeconds; g != nil {
		return time.Duration(*g) * time.Second
	}
	return defaultGrace
}

func writeExit(dir string, e Exit) error {
	data, err := jsonMarshal(Exited{Exit: e, At: time.Now().UTC()})
	if err != nil {
		return err
	}
	return writeAtomic(filepath.Join(dir, ExitFile), data)
}
