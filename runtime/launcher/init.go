package launcher

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

// RunAsInit runs the launcher (args, argv[0] first) as a child and stays as
// the Pod's init, which a launcher Pod needs: it passes SIGTERM and SIGINT
// on and reaps every orphan. libvirtd leaves its QEMU capability probes to
// init; an init that does not reap them leaves zombies, and libvirtd waits
// 30 s for each probe it believes still runs. It returns the child's exit
// code (128 + the signal that ended it).
func RunAsInit(args []string) int {
	// As PID 1 it is the reaper anyway; elsewhere (tests) it asks to be.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintf(os.Stderr, "tekvirt-launcher init: becoming a subreaper: %v\n", err)
	}
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	defer signal.Stop(sigs)
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), initChildEnv+"=1")
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "tekvirt-launcher init: %v\n", err)
		return 1
	}
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			_ = cmd.Process.Signal(sig)
			continue
		}
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
			if pid == cmd.Process.Pid {
				if ws.Signaled() {
					return 128 + int(ws.Signal())
				}
				return ws.ExitStatus()
			}
		}
	}
	return 1
}

// initChildEnv marks the launcher RunAsInit started, so that it does not
// start another.
const initChildEnv = "TEKVIRT_LAUNCHER_CHILD"

// NeedsInit reports whether this process is a Pod's PID 1 that should run
// RunAsInit rather than the launcher itself.
func NeedsInit() bool { return os.Getpid() == 1 && os.Getenv(initChildEnv) == "" }
