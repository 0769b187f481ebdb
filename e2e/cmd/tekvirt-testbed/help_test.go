package main

import "testing"

// TestEveryCommandSaysWhatAndShowsHow: the testbed's commands, which
// `tekvirt <command> --help` prints, say what they do and show an example.
func TestEveryCommandSaysWhatAndShowsHow(t *testing.T) {
	root := newRoot()
	if root.Example == "" {
		t.Error("tekvirt-testbed --help has no example")
	}
	for _, c := range root.Commands() {
		if c.Hidden || c.Name() == "help" || c.Name() == "completion" {
			continue
		}
		if c.Short == "" || c.Example == "" {
			t.Errorf("%s: Short %q, Example %q: want both", c.CommandPath(), c.Short, c.Example)
		}
	}
}
