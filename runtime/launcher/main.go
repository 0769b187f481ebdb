package launcher

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/runtime/domain"
)

// specPoll is how often a launcher Pod looks for its spec.
const specPoll = 200 * time.Millisecond

// defaultGrace is KubeVirt's terminationGracePeriodSeconds default.
const defaultGrace = 180 * time.Second

// Main runs the VM of a launcher Pod until its domain ends: it waits for
// the spec the node's handler writes in dir, starts a libvirtd of its own
// in the Pod and the domain on it, answers the handler on
// dir/launcher.sock, and writes dir/exit.json with how the domain ended.
// Cancelling ctx (SIGTERM) shuts the guest down within its termination
// grace period; a Pod stopped (or a launch cancelled) before the spec came
// ends without error.
func Main(ctx context.Context, dir string, pod *Pod, log *slog.Logger) error {
	spec, err := loadSpec(ctx, dir)
	if spec == nil || err != nil {
		if err == nil {
			log.Info("stopped before the VM was prepared")
		}
		return err
	}
	// The kubelet put the PCI devices that device plugins allocated to
	// this container in its environment.
	spec.Options.PCIDevices = domain.PCIDevicesFromEnv(spec.VMI, os.Getenv)
	stop, warm, err := pod.adopt(ctx, spec, log)
	if err != nil {
		return errors.Join(err, writeExit(dir, Exit{Reason: "Failed: " + err.Error()}))
	}
	defer stop()
	start := time.Now()
	vm, err := Start(spec.URI, spec.VMI, spec.Options)
	if err != nil {
		return errors.Join(err, writeExit(dir, Exit{Reason: "Failed: " + err.Error()}))
	}
	defer vm.Close()
	log.Info("domain started", "domain", spec.VMI.Namespace+"_"+spec.VMI.Name, "took", time.Since(start).Round(time.Millisecond).String())
	warm.report(log)
	srv := newServer(vm, log)
	if len(spec.VMI.Spec.AccessCredentials) > 0 {
		srv.creds = newCredentials(spec.VMI)
	}
	srv.podIPs = srv.forwards.expose(forwardedPorts(spec.VMI), log)
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

// GuestPort is a guest port the Pod's address forwards.
type GuestPort struct {
	Protocol string // "tcp" or "udp"
	Port     int32
}

// forwardedPorts are SSH's (22/tcp, which execute-in-vm and SSH clients
// taking the VMI's address use) and every port the VMI's interfaces
// declare (spec.domain.devices.interfaces[].ports, TCP unless said),
// without repeats.
func forwardedPorts(vmi *v1.VirtualMachineInstance) []GuestPort {
	out := []GuestPort{{"tcp", 22}}
	seen := map[GuestPort]bool{out[0]: true}
	if vmi == nil {
		return out
	}
	for _, iface := range vmi.Spec.Domain.Devices.Interfaces {
		for _, p := range iface.Ports {
			gp := GuestPort{Protocol: strings.ToLower(p.Protocol), Port: p.Port}
			if gp.Protocol == "" {
				gp.Protocol = "tcp"
			}
			if !seen[gp] && gp.Port > 0 && (gp.Protocol == "tcp" || gp.Protocol == "udp") {
				seen[gp] = true
				out = append(out, gp)
			}
		}
	}
	return out
}

// podIPs are the addresses of this network namespace's interfaces, but
// loopback and link-local ones: in a launcher Pod, the Pod's IPs.
func podIPs() []string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	var out []string
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

// adopt makes spec run in the Pod: on its own libvirtd, which starts with
// the node's QEMU capabilities the spec names, with claims' disks at their
// Pod paths. stop ends the libvirtd.
func (p *Pod) adopt(ctx context.Context, spec *Spec, log *slog.Logger) (stop func(), warm *warmCache, err error) {
	p.claimPaths(spec)
	l := &Libvirtd{RunDir: p.LibvirtdDir}
	warm = installCapabilities(spec.QEMUCapabilities, l.CapabilitiesCache(), log)
	stop, err = startLibvirtd(ctx, l, log)
	if err != nil {
		return nil, nil, err
	}
	spec.URI = l.URI()
	return stop, warm, nil
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
