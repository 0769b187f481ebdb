package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
)

// modulePath is tekvirt's Go module, whose source the testbed builds.
const modulePath = "github.com/tekvirt/tekvirt"

// testbedBinary is the program that runs the local testbed (built from
// e2e/cmd/tekvirt-testbed): the CLI hands the testbed commands to it, so
// that no code of the testbed is in this binary.
const testbedBinary = "tekvirt-testbed"

// testbedCommands are the testbed's commands, as `tekvirt <command>`.
var testbedCommands = []struct {
	use, short string
	hidden     bool
}{
	{"up", "Bring the local cluster up (idempotent; --nodes N)", false},
	{"down", "Stop what `tekvirt up` started (--wipe: remove its state too)", false},
	{"status", "Show which components of the local cluster run", false},
	{"release", "Build every image, push it to --registry and write the release into --out", false},
	{"catalog", "Build the step image, push it to --registry and render the Tekton catalog into --out", false},
	{"guest-url", "Print the URL pods download the test guest's disk image from", false},
	{"console-log", "Print the serial console log of a VMI running on this machine's testbed (-f follows)", false},
	{"registry", "Serve the local OCI registry (started by up)", true},
	{"node-link", "Forward an address in a node's network namespace to this machine (started by up)", true},
}

// testbedCmds are the testbed commands, each run by tekvirt-testbed with
// the same arguments.
func testbedCmds(g *globalFlags) []*cobra.Command {
	var out []*cobra.Command
	for _, c := range testbedCommands {
		out = append(out, &cobra.Command{
			Use: c.use, Short: c.short + " [runs " + testbedBinary + "]", Hidden: c.hidden,
			DisableFlagParsing: true,
			RunE: func(cmd *cobra.Command, args []string) error {
				// Flags are not parsed here: the testbed parses them all.
				if v := flagValue(args, "source"); v != "" {
					g.source = v
				}
				if v := flagValue(args, "home"); v != "" {
					g.home = v
				}
				bin, err := g.testbed()
				if err != nil {
					return err
				}
				argv := []string{bin, cmd.Name(), "--home", g.home}
				return syscall.Exec(bin, append(argv, args...), os.Environ())
			},
		})
	}
	return out
}

// testbed finds tekvirt-testbed: built from the source tree (--source, else
// the Go module of the working directory) into the state directory, or
// else the one installed beside this binary (up installs both).
func (g *globalFlags) testbed() (string, error) {
	src := g.source
	if src == "" {
		src = moduleDir()
	}
	if src != "" {
		bin := filepath.Join(g.home, "cache", "tekvirt", testbedBinary)
		build := exec.Command("go", "build", "-trimpath", "-o", bin, "./e2e/cmd/"+testbedBinary)
		build.Dir, build.Stdout, build.Stderr = src, os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return "", fmt.Errorf("building %s from %s: %w", testbedBinary, src, err)
		}
		return bin, nil
	}
	if self, err := os.Executable(); err == nil {
		if self, err = filepath.EvalSymlinks(self); err == nil {
			bin := filepath.Join(filepath.Dir(self), testbedBinary)
			if _, err := os.Stat(bin); err == nil {
				return bin, nil
			}
		}
	}
	return "", errors.New("the testbed commands build the cluster from tekvirt's source: run them inside its source tree or pass --source")
}

// flagValue is the value of --name in args (--name V or --name=V), or "".
func flagValue(args []string, name string) string {
	for i, a := range args {
		switch {
		case a == "--"+name && i+1 < len(args):
			return args[i+1]
		case strings.HasPrefix(a, "--"+name+"="):
			return strings.TrimPrefix(a, "--"+name+"=")
		}
	}
	return ""
}

// moduleDir is the root of the working directory's Go module when that is
// tekvirt's, else "".
func moduleDir() string {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Path}} {{.Dir}}").Output()
	if err != nil {
		return ""
	}
	path, dir, ok := strings.Cut(strings.TrimSpace(string(out)), " ")
	if !ok || path != modulePath {
		return ""
	}
	return dir
}
