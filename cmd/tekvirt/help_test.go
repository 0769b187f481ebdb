package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestEveryCommandSaysWhatAndShowsHow: every command a user sees says what
// it does and shows an example; the testbed's commands print
// tekvirt-testbed's help, which its own test checks.
func TestEveryCommandSaysWhatAndShowsHow(t *testing.T) {
	testbed := map[string]bool{}
	for _, c := range testbedCommands {
		testbed[c.use] = true
	}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if sub.Hidden || sub.Name() == "help" || sub.Name() == "completion" {
				continue
			}
			if c.Parent() == nil && testbed[sub.Name()] {
				continue
			}
			if sub.Short == "" || sub.Example == "" {
				t.Errorf("%s: Short %q, Example %q: want both", sub.CommandPath(), sub.Short, sub.Example)
			}
			walk(sub)
		}
	}
	root := newRoot()
	if root.Example == "" || root.Long == "" {
		t.Error("tekvirt --help has no example or no description")
	}
	walk(root)
}

// TestNamespaceFromKubeconfig: the VM commands' --namespace defaults to the
// kubeconfig context's namespace, else default, as kubectl's and
// virtctl's; a given -n wins; the hosted-cluster commands keep hcp's
// default, clusters.
func TestNamespaceFromKubeconfig(t *testing.T) {
	dir := t.TempDir()
	write := func(name, ns string) string {
		p := filepath.Join(dir, name)
		ctx := "  context: {cluster: c, user: u}\n"
		if ns != "" {
			ctx = "  context: {cluster: c, user: u, namespace: " + ns + "}\n"
		}
		kc := "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: https://127.0.0.1:1}\nusers:\n- name: u\n  user: {token: x}\n" +
			"contexts:\n- name: x\n" + ctx + "current-context: x\n"
		if err := os.WriteFile(p, []byte(kc), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		kubeconfig string
		args       []string
		want       string
	}{
		{write("with-ns", "tenant"), []string{"stop", "demo"}, "tenant"},
		{write("without-ns", ""), []string{"stop", "demo"}, "default"},
		{filepath.Join(dir, "with-ns"), []string{"stop", "demo", "-n", "other"}, "other"},
		{filepath.Join(dir, "with-ns"), []string{"console", "demo"}, "tenant"},
		{filepath.Join(dir, "with-ns"), []string{"destroy", "cluster", "kubevirt"}, "clusters"},
	} {
		t.Setenv("KUBECONFIG", tc.kubeconfig)
		root := newRoot()
		cmd, rest, err := root.Find(tc.args)
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.ParseFlags(rest); err != nil {
			t.Fatal(err)
		}
		if err := root.PersistentPreRunE(cmd, nil); err != nil {
			t.Fatal(err)
		}
		if got := cmd.Flags().Lookup("namespace").Value.String(); got != tc.want {
			t.Errorf("tekvirt %s with %s: namespace %q, want %q", strings.Join(tc.args, " "), filepath.Base(tc.kubeconfig), got, tc.want)
		}
	}
}
