package main

import (
	"errors"
	"fmt"
	"net/http"
	"net/mail"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/tekvirt/tekvirt/catalog"
	"github.com/tekvirt/tekvirt/e2e/cluster"
	"github.com/tekvirt/tekvirt/e2e/registry"
)

const modulePath = "github.com/tekvirt/tekvirt"

type globalFlags struct {
	home   string
	source string
}

func newRoot() *cobra.Command {
	g := &globalFlags{}
	root := &cobra.Command{
		Use:           "tekvirt",
		Short:         "The local testbed: a bare cluster on this machine with tekvirt installed from its release",
		Example:       "  tekvirt up --nodes 2\n  tekvirt status\n  tekvirt down",
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
	root.PersistentFlags().StringVar(&g.source, "source", "", "tekvirt source tree (default: found from the working directory)")
	root.AddCommand(upCmd(g), releaseCmd(g), catalogCmd(g), downCmd(g), statusCmd(g), registryCmd(), nodeLinkCmd(), guestURLCmd(g), consoleCmd(g))
	return root
}

// cluster is the testbed, with the source tree it builds from.
func (g *globalFlags) cluster(cmd *cobra.Command) (*cluster.Cluster, error) {
	src := g.source
	if src == "" {
		var err error
		if src, err = findSource(); err != nil {
			return nil, err
		}
	}
	return cluster.New(g.home, src, cmd.OutOrStdout())
}

// running is the testbed for the commands that build nothing (down,
// status, guest-url): they work from any directory.
func (g *globalFlags) running(cmd *cobra.Command) (*cluster.Cluster, error) {
	src := g.source
	if src == "" {
		src, _ = findSource()
	}
	return cluster.New(g.home, src, cmd.OutOrStdout())
}

// findSource walks up from the working directory to the tekvirt module root.
func findSource() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.HasPrefix(string(data), "module "+modulePath+"\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("run tekvirt inside its source tree or pass --source: it builds the cluster's binaries from it")
		}
		dir = parent
	}
}

func upCmd(g *globalFlags) *cobra.Command {
	nodes, forge := 1, false
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Bring the local cluster up (idempotent: starts only what is not running)",
		Long: "Bring the local cluster up: build Kubernetes, Tekton, tkn and tekvirt from their Go modules (the\n" +
			"first time, about 15 minutes on 2 cores), start the control plane and the nodes, and install\n" +
			"tekvirt from its release. Needs root, the Debian packages .ci/setup-host installs, 4 GiB of\n" +
			"memory and 20 GiB of free disk the first time; it says which is missing.",
		Example: "  go run ./cmd/tekvirt up              # one node\n  go run ./cmd/tekvirt up --nodes 2    # as make test\n  tekvirt up --forge                   # also the local forge and Pipelines-as-Code",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if nodes < 1 {
				return fmt.Errorf("--nodes %d: a cluster has at least one node", nodes)
			}
			c, err := g.cluster(cmd)
			if err != nil {
				return err
			}
			c.Nodes, c.Forge = nodes, forge
			return c.Up(cmd.Context())
		},
	}
	cmd.Flags().BoolVar(&forge, "forge", false, "also run the local git forge (Gitea) and Pipelines-as-Code, and write their addresses and the forge admin's API token to $TEKVIRT_HOME/"+cluster.ForgeEnvFile+" (builds both the first time: ~16 min on 2 cores)")
	cmd.Flags().IntVar(&nodes, "nodes", nodes, "number of nodes: this machine, and each other one a kubelet, containerd and kube-proxy in network and mount namespaces of their own (nodes beyond it that a previous up made are removed)")
	return cmd
}

// nodeLinkCmd serves an extra node's loopback address with a host address,
// so that the node's containerd pulls from the registry as the first
// node's does, and no pod can reach the registry.
func nodeLinkCmd() *cobra.Command {
	var netns, listen, to string
	cmd := &cobra.Command{
		Use:    "node-link",
		Short:  "Forward a TCP address in a node's network namespace to one on this machine (started by up)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(_ *cobra.Command, _ []string) error {
			l, err := cluster.ListenIn(netns, listen)
			if err != nil {
				return err
			}
			return cluster.ForwardInto(l, to)
		},
	}
	cmd.Flags().StringVar(&netns, "netns", "", "network namespace file")
	cmd.Flags().StringVar(&listen, "listen", "", "address to listen on inside the namespace")
	cmd.Flags().StringVar(&to, "to", "", "address on this machine connections are forwarded to")
	for _, f := range []string{"netns", "listen", "to"} {
		_ = cmd.MarkFlagRequired(f)
	}
	return cmd
}

func releaseCmd(g *globalFlags) *cobra.Command {
	var registry, out string
	cmd := &cobra.Command{
		Use:     "release",
		Short:   "Build every image, push it to --registry and write the release (" + cluster.ReleaseOperatorFile + ", " + cluster.ReleaseCRFile + ") into --out",
		Example: "  tekvirt release --registry registry.example/tekvirt --out _out/release",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.cluster(cmd)
			if err != nil {
				return err
			}
			if err := c.Release(cmd.Context(), registry, out); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "kubectl apply --server-side -f %s\nkubectl apply --server-side -f %s\n",
				filepath.Join(out, cluster.ReleaseOperatorFile), filepath.Join(out, cluster.ReleaseCRFile))
			return nil
		},
	}
	cmd.Flags().StringVar(&registry, "registry", cluster.RegistryClusterAddr, "registry (host:port[/path]) the images are pushed to and named from")
	cmd.Flags().StringVar(&out, "out", "_out/release", "directory the release's files are written to")
	return cmd
}

func catalogCmd(g *globalFlags) *cobra.Command {
	var registry, out, maintainer string
	p := catalog.Publication{Provider: "tekvirt", HubRepository: "tekvirt"}
	cmd := &cobra.Command{
		Use:     "catalog",
		Short:   "Build the step image, push it to --registry and render the Tekton catalog (task/<name>/<version>/, pipeline/...) into --out",
		Example: "  tekvirt catalog --registry registry.example/tekvirt --out _out/catalog --version 0.1",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			m, err := mail.ParseAddress(maintainer)
			if err != nil {
				return fmt.Errorf("--maintainer %q is not \"Name <email>\": %w", maintainer, err)
			}
			p.Maintainers = []catalog.Maintainer{{Name: m.Name, Email: m.Address}}
			c, err := g.cluster(cmd)
			if err != nil {
				return err
			}
			if err := c.Catalog(cmd.Context(), registry, out, p); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "catalog %s in %s (e.g. kubectl apply -n NAMESPACE -f %s -f %s)\n", p.Version, out,
				filepath.Join(out, "task", "import-disk", p.Version, "import-disk-rbac.yaml"), filepath.Join(out, "task", "import-disk", p.Version, "import-disk.yaml"))
			return nil
		},
	}
	cmd.Flags().StringVar(&registry, "registry", cluster.RegistryClusterAddr, "registry (host:port[/path]) the step image is pushed to and named from")
	cmd.Flags().StringVar(&out, "out", "_out/catalog", "directory the catalog is written to (replaced)")
	cmd.Flags().StringVar(&p.Version, "version", "0.1", "the catalog's version (MAJOR.MINOR[.PATCH]): each task's folder and version label")
	cmd.Flags().StringVar(&maintainer, "maintainer", "", "the catalog's maintainer on Artifact Hub, \"Name <email>\"")
	cmd.Flags().StringVar(&p.Provider, "provider", p.Provider, "the catalog's provider on Artifact Hub")
	cmd.Flags().StringVar(&p.HubRepository, "hub-repository", p.HubRepository, "the catalog's repository name on Artifact Hub (recommendations link to it)")
	return cmd
}

func downCmd(g *globalFlags) *cobra.Command {
	var wipe bool
	cmd := &cobra.Command{
		Use:     "down",
		Short:   "Stop what `tekvirt up` started",
		Example: "  tekvirt down          # the state stays for the next up\n  tekvirt down --wipe   # the state goes too; the build caches stay",
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.running(cmd)
			if err != nil {
				return err
			}
			return c.Down(wipe)
		},
	}
	cmd.Flags().BoolVar(&wipe, "wipe", false, "also remove all cluster state (the build cache is kept)")
	return cmd
}

func statusCmd(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:     "status",
		Short:   "Show which components run",
		Example: "  tekvirt status",
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.running(cmd)
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "COMPONENT\tSTATE\tPID\tLOG")
			down := 0
			for _, s := range c.Status() {
				state := "running"
				if s.PID == 0 {
					state, down = "stopped", down+1
				}
				fmt.Fprintf(w, "%s\t%s\t%d\t%s\n", s.Name, state, s.PID, s.LogFile)
			}
			if err := w.Flush(); err != nil {
				return err
			}
			if down > 0 {
				return fmt.Errorf("%d components are not running; `tekvirt up` starts them", down)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "\nexport KUBECONFIG=%s\n", c.Kubeconfig())
			return nil
		},
	}
}

func registryCmd() *cobra.Command {
	var addr, dir, filesAddr, filesDir, clusterAddr string
	var pushers []string
	cmd := &cobra.Command{
		Use:    "registry",
		Short:  "Serve the local OCI registry (started by `tekvirt up`)",
		Hidden: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			h, err := registry.New(dir)
			if err != nil {
				return err
			}
			servers := []*http.Server{{Addr: addr, Handler: h, ReadHeaderTimeout: 10 * time.Second}}
			if clusterAddr != "" {
				// For Pods and guests, behind the registry's Service: they
				// pull, the host (its own addresses) pushes.
				var from []netip.Addr
				for _, p := range pushers {
					a, err := netip.ParseAddr(p)
					if err != nil {
						return fmt.Errorf("--pusher %q: %w", p, err)
					}
					from = append(from, a)
				}
				servers = append(servers, &http.Server{Addr: clusterAddr, Handler: registry.PullOnly(h, from...), ReadHeaderTimeout: 10 * time.Second})
			}
			if filesAddr != "" {
				// Read-only, for pods: they cannot reach the registry on loopback.
				servers = append(servers, &http.Server{Addr: filesAddr, Handler: http.FileServer(http.Dir(filesDir)), ReadHeaderTimeout: 10 * time.Second})
			}
			errs := make(chan error, len(servers))
			for _, srv := range servers {
				go func() { errs <- srv.ListenAndServe() }()
			}
			select {
			case <-cmd.Context().Done():
			case err := <-errs:
				if !errors.Is(err, http.ErrServerClosed) {
					return err
				}
			}
			for _, srv := range servers {
				_ = srv.Close()
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&addr, "addr", cluster.RegistryAddr, "listen address")
	cmd.Flags().StringVar(&dir, "dir", "", "storage directory")
	cmd.Flags().StringVar(&filesAddr, "files-addr", "", "also serve --files-dir over plain HTTP on this address")
	cmd.Flags().StringVar(&filesDir, "files-dir", "", "directory served on --files-addr")
	cmd.Flags().StringVar(&clusterAddr, "cluster-addr", "", "also serve the registry here, taking pushes only from --pusher")
	cmd.Flags().StringSliceVar(&pushers, "pusher", nil, "address whose pushes --cluster-addr takes (repeatable)")
	_ = cmd.MarkFlagRequired("dir")
	return cmd
}

// guestURLCmd prints where pods can download the guest's disk images.
func guestURLCmd(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:     "guest-url [FILE]",
		Short:   "Print the URL pods download the guest disk image from (default guest.qcow2.xz)",
		Example: "  tekvirt guest-url\n  tekvirt guest-url guest.raw",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.running(cmd)
			if err != nil {
				return err
			}
			file := "guest.qcow2.xz"
			if len(args) == 1 {
				file = args[0]
			}
			fmt.Fprintln(cmd.OutOrStdout(), c.GuestURL(file))
			return nil
		},
	}
}
