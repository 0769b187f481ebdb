package vmwebhook

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// fieldTree is a set of allowed field paths.
type fieldTree struct {
	children map[string]*fieldTree
	// subtree allows everything below.
	subtree bool
	// values, when set, are the only values allowed.
	values []string
}

func newTree() *fieldTree { return &fieldTree{children: map[string]*fieldTree{}} }

// add allows one path (see vmiSpecFields for the syntax).
func (t *fieldTree) add(pattern string) {
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

// graft puts sub under path.
func (t *fieldTree) graft(path string, sub *fieldTree) {
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

// check returns one message per field of v (at path) the tree does not allow.
func (t *fieldTree) check(path string, v any) []string {
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
			out = append(out, c.check(path+"."+k, val[k])...)
		}
		return out
	case []any:
		var out []string
		for i, e := range val {
			out = append(out, t.check(path+"["+strconv.Itoa(i)+"]", e)...)
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
