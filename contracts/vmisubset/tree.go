package vmisubset

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Tree is a set of allowed field paths.
type Tree struct {
	children map[string]*Tree
	// subtree allows everything below.
	subtree bool
	// values, when set, are the only values allowed.
	values []string
}

func newTree() *Tree { return &Tree{children: map[string]*Tree{}} }

// add allows one path (see Fields for the syntax).
func (t *Tree) add(pattern string) {
	path, values, _ := strings.Cut(pattern, "=")
	n := t
	for _, seg := range strings.Split(path, ".") {
		if seg == "**" {
			n.subtree = true
			return
		}
		c, ok := n.children[seg]
		if !ok {
			c = newTree()
			n.children[seg] = c
		}
		n = c
	}
	if values != "" {
		n.values = strings.Split(values, "|")
	}
}

// Graft puts sub under path.
func (t *Tree) Graft(path string, sub *Tree) {
	n := t
	segs := strings.Split(path, ".")
	for _, seg := range segs[:len(segs)-1] {
		c, ok := n.children[seg]
		if !ok {
			c = newTree()
			n.children[seg] = c
		}
		n = c
	}
	n.children[segs[len(segs)-1]] = sub
}

// Check returns one message per field of v (a value decoded from JSON, at
// path) the tree does not allow.
func (t *Tree) Check(path string, v any) []string {
	if t.subtree {
		return nil
	}
	switch val := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(val))
		for k := range val {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var out []string
		for _, k := range keys {
			c := t.children[k]
			if c == nil {
				c = t.children["*"]
			}
			if c == nil {
				out = append(out, path+"."+k)
				continue
			}
			out = append(out, c.Check(path+"."+k, val[k])...)
		}
		return out
	case []any:
		var out []string
		for i, e := range val {
			out = append(out, t.Check(path+"["+strconv.Itoa(i)+"]", e)...)
		}
		return out
	default:
		if len(t.values) == 0 || v == nil {
			return nil
		}
		s := fmt.Sprint(v)
		for _, ok := range t.values {
			if s == ok {
				return nil
			}
		}
		return []string{fmt.Sprintf("%s: %q (supported: %s)", path, s, strings.Join(t.values, ", "))}
	}
}

// NewTree allows the paths of patterns (see Fields for the syntax).
func NewTree(patterns ...string) *Tree {
	t := newTree()
	for _, p := range patterns {
		t.add(p)
	}
	return t
}
