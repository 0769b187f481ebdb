// Command tekvirt-launcher runs one VM: the handler starts it with the VM's
// directory on the node, or it is a launcher Pod's entrypoint (with
// --libvirtd), and it lives as long as the VM's libvirt domain.
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
	var dir, libvirtd string
	flag.StringVar(&dir, "dir", "", "the VM's directory, holding "+launcher.SpecFile)
	flag.StringVar(&libvirtd, "libvirtd", "", "start a libvirtd of the launcher's own with this run directory (in a launcher Pod) and run the VM there")
	flag.Parse()
	if dir == "" {
		fmt.Fprintln(os.Stderr, "tekvirt-launcher: --dir is required")
		os.Exit(2)
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil)).With("vmDir", dir)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := launcher.Main(ctx, dir, libvirtd, log); err != nil {
		log.Error("launcher failed", "err", err)
		os.Exit(1)
	}
}
