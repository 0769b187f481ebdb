package e2e

import (
	"context"
	"encoding/xml"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tekvirt/tekvirt/e2e/cluster"
	"github.com/tekvirt/tekvirt/e2e/framework"
)

// conformanceFocus selects the conformance tests of the areas the hosted
// data plane serves: sig-network (Services, DNS, networking,
// EndpointSlices), sig-node (Pods, probes, ConfigMaps, Secrets) and
// sig-apps (Deployments, ReplicaSets, Jobs, ...).
const conformanceFocus = `\[sig-(network|node|apps)\].*\[Conformance\]`

// conformanceKnown are the selected tests that do not pass here, by
// pattern, with why; docs/conformance.md lists them too. Any other failure
// fails the run.
var conformanceKnown = map[string]string{
	`\[sig-node\] Kubelet when scheduling a read only busybox container .*should not write to root filesystem`: "the tests' busybox image runs bash as sh " +
		"(Debian 12's busybox 1.35 ash drops environment variables whose names are no shell names, which the ConfigMap and Secret tests read back); " +
		"the root filesystem is read-only, and the test wants ash's wording of the error",
}

// TestConformance runs the selected conformance tests against the
// testbed itself, the cluster users run VMs on (make conformance).
func TestConformance(t *testing.T) {
	conformanceRun(t)
	f := framework.New(t)
	runConformance(t, f, "infrastructure", os.Getenv("KUBECONFIG"))
}

// TestConformanceHosted creates a hosted cluster with two workers as a
// user does and runs the selected conformance tests against it (make
// conformance-hosted). The workers have the CLI's default memory (8Gi):
// their images live on a tmpfs of half of it, and the tests' images
// filled the 1 GiB of 2Gi workers (DiskPressure, Pods evicted); one core
// each, as this machine has two.
func TestConformanceHosted(t *testing.T) {
	conformanceRun(t)
	f := framework.New(t)
	ns := f.Namespace(t)
	const name = "conformance"
	start := time.Now()
	createTwoWorkers(t, f, ns, name, "8Gi", "2")
	kc, err := f.Kube.CoreV1().Secrets(ns).Get(context.Background(), name+"-admin-kubeconfig", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "hosted.kubeconfig")
	if err := os.WriteFile(path, kc.Data["kubeconfig"], 0o600); err != nil {
		t.Fatal(err)
	}
	t.Logf("create -> 2 workers Ready: %s", time.Since(start).Round(time.Second))
	runConformance(t, f, "hosted", path)
	t.Logf("create -> conformance subset done: %s", time.Since(start).Round(time.Second))
}

// runConformance builds Kubernetes' e2e suite and its images (once), runs
// the selected tests against the cluster of kubeconfig and reports them;
// the suite's output and JUnit report stay in $TEKVIRT_HOME/logs.
func runConformance(t *testing.T, f *framework.Framework, target, kubeconfig string) {
	ctx := context.Background()
	source, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	c, err := cluster.New(f.Home, source, logWriter{t})
	if err != nil {
		t.Fatal(err)
	}
	conf, err := c.PrepareConformance(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if target == "hosted" {
		prepull(t, kubeconfig, conf.Images)
	}
	report := c.LogFile("conformance-" + target)
	reportDir := strings.TrimSuffix(report, ".log")
	if err := os.MkdirAll(reportDir, 0o755); err != nil {
		t.Fatal(err)
	}
	log, err := os.Create(report)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	// CONFORMANCE_FOCUS replaces the selection (make conformance
	// CONFORMANCE_FOCUS=...), e.g. to look at one test again.
	focus := conformanceFocus
	if narrow := os.Getenv("CONFORMANCE_FOCUS"); narrow != "" {
		focus = narrow
	}
	start := time.Now()
	cmd := exec.CommandContext(ctx, conf.Suite, "--kubeconfig", kubeconfig, "--kubectl-path", f.Bin("kubectl"), "--provider", "local", "--report-dir", reportDir,
		"--ginkgo.focus", focus, "--ginkgo.timeout", "8h", "--ginkgo.no-color")
	cmd.Env = append(os.Environ(), "KUBE_TEST_REPO_LIST="+conf.RepoList)
	cmd.Stdout, cmd.Stderr = log, log
	t.Logf("running %s's conformance subset; output in %s", target, report)
	runErr := cmd.Run()
	results, err := readJUnit(filepath.Join(reportDir, "junit_01.xml"))
	if err != nil {
		t.Fatalf("suite: %v; report: %v (see %s)", runErr, err, report)
	}
	sum := summarize(results, regexp.MustCompile(focus))
	t.Logf("%s: %d passed, %d failed, %d skipped of %d selected in %s", target, sum.passed, len(sum.failed), sum.skipped,
		sum.passed+len(sum.failed)+sum.skipped, time.Since(start).Round(time.Second))
	if len(sum.slowest) > 0 {
		t.Logf("the slowest:")
	}
	for _, c := range sum.slowest {
		t.Logf("  %6.0f s  %s", c.Seconds, strings.TrimPrefix(c.Name, "[It] "))
	}
	for _, name := range sum.failed {
		if why := knownFailure(name); why != "" {
			t.Logf("known failure: %s (%s)", name, why)
			continue
		}
		t.Errorf("failed: %s", name)
	}
}

// logWriter writes the testbed's progress lines to the test's log.
type logWriter struct{ t *testing.T }

func (w logWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

func knownFailure(name string) string {
	for pattern, why := range conformanceKnown {
		if regexp.MustCompile(pattern).MatchString(name) {
			return why
		}
	}
	return ""
}

// junitCase is one test of the suite's JUnit report.
type junitCase struct {
	Name    string    `xml:"name,attr"`
	Seconds float64   `xml:"time,attr"`
	Skipped *struct{} `xml:"skipped"`
	Failure *struct{} `xml:"failure"`
	Error   *struct{} `xml:"error"`
}

func readJUnit(path string) ([]junitCase, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var doc struct {
		Suites []struct {
			Cases []junitCase `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var out []junitCase
	for _, s := range doc.Suites {
		out = append(out, s.Cases...)
	}
	return out, nil
}

type conformanceSummary struct {
	passed, skipped int
	failed          []string
	// slowest are the selected tests that ran, longest first (at most
	// slowestShown): where a run's time goes.
	slowest []junitCase
}

const slowestShown = 5

// summarize counts the cases that focus selects.
func summarize(cases []junitCase, focus *regexp.Regexp) conformanceSummary {
	var s conformanceSummary
	for _, c := range cases {
		switch {
		case !focus.MatchString(c.Name):
			continue
		case c.Failure != nil || c.Error != nil:
			s.failed = append(s.failed, c.Name)
		case c.Skipped != nil:
			s.skipped++
			continue
		default:
			s.passed++
		}
		s.slowest = append(s.slowest, c)
	}
	sort.SliceStable(s.slowest, func(i, j int) bool { return s.slowest[i].Seconds > s.slowest[j].Seconds })
	if len(s.slowest) > slowestShown {
		s.slowest = s.slowest[:slowestShown]
	}
	return s
}

func TestSummarize(t *testing.T) {
	cases := []junitCase{
		{Name: "[It] [sig-network] a [Conformance]", Seconds: 10},
		{Name: "[It] [sig-network] b [Conformance]", Seconds: 30, Failure: &struct{}{}},
		{Name: "[It] [sig-network] c [Conformance]", Skipped: &struct{}{}},
		{Name: "[It] [sig-storage] d [Conformance]", Seconds: 99},
		{Name: "[It] [sig-network] e [Conformance]", Seconds: 20},
		{Name: "[SynchronizedBeforeSuite]", Seconds: 1},
	}
	s := summarize(cases, regexp.MustCompile(`\[sig-network\].*\[Conformance\]`))
	if s.passed != 2 || s.skipped != 1 || len(s.failed) != 1 || s.failed[0] != cases[1].Name {
		t.Errorf("passed %d skipped %d failed %v; want 2, 1, [%s]", s.passed, s.skipped, s.failed, cases[1].Name)
	}
	var order []float64
	for _, c := range s.slowest {
		order = append(order, c.Seconds)
	}
	if fmt.Sprint(order) != "[30 20 10]" {
		t.Errorf("slowest %v, want [30 20 10] (ran, selected, longest first)", order)
	}
}
