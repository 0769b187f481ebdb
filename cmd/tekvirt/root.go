package main

import (
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
)

type globalFlags struct {
	home   string
	source string
}

func newRoot() *cobra.Command {
	g := &globalFlags{}
	root := &cobra.Command{
		Use:           "tekvirt",
		Short:         "Virtual machines on Kubernetes as Tekton pipelines",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	defHome := os.Getenv("TEKVIRT_HOME")
	if defHome == "" {
		if h, err := os.UserHomeDir(); err == nil {
			defHome = filepath.Join(h, ".tekvirt")
		}
	}
	root.PersistentFlags().StringVar(&g.home, "home", defHome, "state directory ($TEKVIRT_HOME)")
	root.PersistentFlags().StringVar(&g.source, "source", "", "tekvirt source tree, for the testbed commands (default: the Go module of the working directory)")
	root.AddCommand(vmCmds(g)...)
	root.AddCommand(exposeCmd(g))
	root.AddCommand(imageUploadCmd(g), consoleCmd(g))
	root.AddCommand(clusterCmds(g)...)
	root.AddCommand(testbedCmds(g)...)
	return root
}
