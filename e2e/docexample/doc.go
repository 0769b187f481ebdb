// Package docexample reads the shell and YAML examples of the README and
// of docs/ so that tests run them as written: the docs cannot rot.
//
// Every fenced block whose language is a shell's or YAML is preceded by a
// marker comment on the line before its fence:
//
//	<!-- test: first-vm -->              run by the e2e test that calls Find(t, "first-vm")
//	<!-- not tested: why it cannot run -->
//
// A block without a marker, a test id that no test names, or a name that
// no block has fails `make test-unit` (TestEveryExampleIsRunOrSaysWhy).
package docexample
