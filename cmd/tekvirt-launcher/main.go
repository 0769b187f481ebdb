// Command tekvirt-launcher runs one VM: it is a launcher Pod's entrypoint,
// and it lives as long as the VM's libvirt domain. With
// --probe-qemu-capabilities it is the handler Pod's init container, which
// probes QEMU once for every launcher on the node. With --hold it is an
// attachment Pod's only process: it holds the Pod, and with it the claim
// of a hotplugged volume, until the Pod is stopped.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/tekvirt/tekvirt/runtime/launcher"
)

func main() {
	if launcher.NeedsInit() {
		os.Exit(launcher.RunAsInit(os.Args))
	}
	var dir string
	var pod launcher.Pod
	flag.StringVar(&dir, "dir", "", "the VM's directory, where the handler writes "+launcher.SpecFile)
	flag.StringVar(&pod.LibvirtdDir, "libvirtd", "", "run directory of the launcher's own libvirtd, which runs the VM")
	flag.StringVar(&pod.DisksDir, "disks-dir", "", "where each claim volume is mounted, as <dir>/<volume>")
	var probeOut string
	flag.StringVar(&probeOut, "probe-qemu-capabilities", "", "probe QEMU with a libvirtd run in --libvirtd, write libvirt's capabilities files into this directory and exit")
	hold := flag.Bool("hold", false, "do nothing until stopped (an attachment Pod, which holds a hotplugged volume's claim on the node)")
	flag.Parse()
	if *hold {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
		defer stop()
		<-ctx.Done()
		return
	}
	if probeOut != "" && pod.LibvirtdDir != "" {
		log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
		defer stop()
		if err := launcher.ProbeQEMU(ctx, pod.LibvirtdDir, probeOut, log); err != nil {
			// Launchers then probe QEMU themselves: slower, not broken.
			log.Error("QEMU capabilities not probed; each launcher will probe QEMU itself", "err", err)
		}
		return
	}
	if dir == "" || pod.LibvirtdDir == "" {
		fmt.Fprintln(os.Stderr, "tekvirt-launcher: --dir and --libvirtd are required")
		os.Exit(2)
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil)).With("vmDir", dir)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := launcher.Main(ctx, dir, &pod, log); err != nil {
		log.Error("launcher failed", "err", err)
		os.Exit(1)
	}
}
