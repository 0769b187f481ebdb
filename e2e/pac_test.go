package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	pipelinev1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"knative.dev/pkg/apis"
	"sigs.k8s.io/yaml"

	"github.com/tekvirt/tekvirt/e2e/framework"
)

// The Pipelines-as-Code samples users copy into their repositories.
const (
	pacPullRequest = "../catalog/pac/.tekton/pull-request.yaml"
	pacPush        = "../catalog/pac/.tekton/push.yaml"
)

// pacTasks are the catalog tasks the samples run through the cluster resolver.
var pacTasks = []string{"create-vm-from-manifest", "execute-in-vm", "cleanup-vm"}

// pacRepo is a repository on the local forge wired to Pipelines-as-Code: a
// Repository object in ns, its token and webhook secret, and Gitea's
// webhook to the PaC controller.
type pacRepo struct {
	g        *forge
	name, ns string
}

func newPaCRepo(t *testing.T, f *framework.Framework, g *forge) *pacRepo {
	t.Helper()
	ctx := context.Background()
	r := &pacRepo{g: g, ns: f.Namespace(t)}
	r.name = "pac-" + r.ns
	applyTaskRBAC(t, f, r.ns, renderCatalog(t, f), pacTasks...)
	url := g.repo(t, r.name)
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	webhookSecret := hex.EncodeToString(b)
	if _, err := f.Kube.CoreV1().Secrets(r.ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "forge"},
		StringData: map[string]string{"provider.token": g.Token, "webhook.secret": webhookSecret}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	repo := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "pipelinesascode.tekton.dev/v1alpha1", "kind": "Repository",
		"metadata": map[string]any{"name": "ci", "namespace": r.ns},
		"spec": map[string]any{"url": url, "git_provider": map[string]any{"type": "gitea", "url": g.URL,
			"secret":         map[string]any{"name": "forge", "key": "provider.token"},
			"webhook_secret": map[string]any{"name": "forge", "key": "webhook.secret"}}},
	}}
	if err := f.VMClient(t).Create(ctx, repo); err != nil {
		t.Fatal(err)
	}
	g.hook(t, r.name, g.PaCURL, webhookSecret)
	return r
}

// runsOf lists the PipelineRuns PaC made for commit sha.
func (r *pacRepo) runsOf(f *framework.Framework, sha string) ([]pipelinev1.PipelineRun, error) {
	list, err := f.Tekton.TektonV1().PipelineRuns(r.ns).List(context.Background(), metav1.ListOptions{LabelSelector: "pipelinesascode.tekton.dev/sha=" + sha})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// waitRuns waits until PaC made n PipelineRuns for sha and returns them.
func (r *pacRepo) waitRuns(t *testing.T, f *framework.Framework, sha string, n int, timeout time.Duration) []pipelinev1.PipelineRun {
	t.Helper()
	var runs []pipelinev1.PipelineRun
	framework.Eventually(t, timeout, fmt.Sprintf("%d PipelineRuns of %s in %s", n, sha, r.ns), func() error {
		var err error
		if runs, err = r.runsOf(f, sha); err != nil {
			return err
		}
		if len(runs) < n {
			return fmt.Errorf("%d PipelineRuns", len(runs))
		}
		return nil
	})
	return runs
}

// waitStatus waits until the newest status PaC set on sha is final, and
// returns it.
func (r *pacRepo) waitStatus(t *testing.T, sha string, timeout time.Duration) commitStatus {
	t.Helper()
	var st commitStatus
	framework.Eventually(t, timeout, "a final commit status on "+sha, func() error {
		sts, err := r.g.statuses(r.name, sha)
		if err != nil {
			return err
		}
		if len(sts) == 0 {
			return fmt.Errorf("no status")
		}
		if st = sts[0]; st.State == "pending" {
			return fmt.Errorf("pending: %s", st.Description)
		}
		return nil
	})
	return st
}

// TestPaCPullRequestAndPush: a repository on the local forge holds the
// samples of catalog/pac/.tekton; Pipelines-as-Code (with the Repository
// object and the forge's webhook a user makes from $TEKVIRT_HOME/forge/env)
// runs the pull-request pipeline for a pull request, which boots a VM,
// checks it and deletes it, and reports success as a commit status on the
// forge; a pull request that breaks the check script gets a failure; a
// `/retest` comment runs the failed one again (PaC's /retest re-runs what
// failed) and `/test` the passed one; a pull request adding a .tekton file
// that is not YAML gets a comment naming the file and the error, not
// silence; the push of the .tekton files to main runs the push pipeline.
func TestPaCPullRequestAndPush(t *testing.T) {
	forgeOnly(t)
	f := framework.New(t)
	g := newForge(t, f)
	prYAML, err := os.ReadFile(pacPullRequest)
	if err != nil {
		t.Fatal(err)
	}
	pushYAML, err := os.ReadFile(pacPush)
	if err != nil {
		t.Fatal(err)
	}
	r := newPaCRepo(t, f, g)
	pushed := time.Now()
	head := g.commit(t, r.name, "main", "", "the CI pipelines", map[string]string{".tekton/pull-request.yaml": string(prYAML), ".tekton/push.yaml": string(pushYAML)})

	const check = "test \"`hostname`\" = pac-check"
	if !strings.Contains(string(prYAML), check) {
		t.Fatalf("%s no longer checks %q", pacPullRequest, check)
	}
	good := g.commit(t, r.name, "main", "good", "a change that keeps the check", map[string]string{"README.md": "# checked\n"})
	opened := time.Now()
	goodPR := g.pullRequest(t, r.name, "good", "keeps the check")
	broken := g.commit(t, r.name, "main", "broken", "a change that breaks the check",
		map[string]string{".tekton/pull-request.yaml": strings.Replace(string(prYAML), check, "test \"`hostname`\" = another-host", 1)})
	brokenPR := g.pullRequest(t, r.name, "broken", "breaks the check")
	invalid := g.commit(t, r.name, "main", "invalid", "a .tekton file that is not YAML",
		map[string]string{".tekton/invalid.yaml": "apiVersion: tekton.dev/v1\nkind: PipelineRun\nmetadata: [name: oops\n"})
	invalidPR := g.pullRequest(t, r.name, "invalid", "adds invalid YAML")

	runs := r.waitRuns(t, f, good, 1, 3*time.Minute)
	created := runs[0].CreationTimestamp.Sub(opened).Round(100 * time.Millisecond)
	st := r.waitStatus(t, good, 10*time.Minute)
	t.Logf("pull request opened -> PipelineRun %s created: %s; -> commit status %q (%s): %s", runs[0].Name, created, st.State, st.Context, time.Since(opened).Round(time.Second))
	if st.State != "success" {
		t.Errorf("the pull request keeping the check: commit status %+v, want success", st)
	}
	if got := runs[0].Labels["pipelinesascode.tekton.dev/event-type"]; got != "pull_request" {
		t.Errorf("PipelineRun %s: event type %q, want pull_request", runs[0].Name, got)
	}
	logs := pipelineRunLogs(t, f, r.ns, runs[0].Name, "check")
	if !strings.Contains(logs, "checking "+good) || !strings.Contains(logs, "check passed") {
		t.Errorf("the check's output lacks the revision %s PaC substituted, or its verdict:\n%s", good, logs)
	}

	st = r.waitStatus(t, broken, 10*time.Minute)
	if st.State != "failure" {
		t.Errorf("the pull request breaking the check: commit status %+v, want failure", st)
	}
	brokenRuns := r.waitRuns(t, f, broken, 1, time.Minute)
	if c := brokenRuns[0].Status.GetCondition(apis.ConditionSucceeded); c == nil || !c.IsFalse() {
		t.Errorf("PipelineRun %s of the broken check: %v, want failed", brokenRuns[0].Name, c)
	}

	framework.Eventually(t, 3*time.Minute, "an error about .tekton/invalid.yaml on the forge", func() error {
		sts, err := g.statuses(r.name, invalid)
		if err != nil {
			return err
		}
		comments, err := g.comments(r.name, invalidPR)
		if err != nil {
			return err
		}
		for _, s := range sts {
			if s.State != "pending" && s.State != "success" && strings.Contains(s.Description, "invalid.yaml") {
				t.Logf("invalid YAML: commit status %q: %s", s.State, s.Description)
				return nil
			}
		}
		for _, c := range comments {
			if strings.Contains(c, "invalid.yaml") {
				t.Logf("invalid YAML: comment on the pull request: %s", c)
				return nil
			}
		}
		return fmt.Errorf("statuses %+v, comments %q", sts, comments)
	})

	g.comment(t, r.name, brokenPR, "/retest")
	g.comment(t, r.name, goodPR, "/test")
	for _, rerun := range []struct {
		comment, sha, want string
	}{{"/retest", broken, "False"}, {"/test", good, "True"}} {
		runs := r.waitRuns(t, f, rerun.sha, 2, 3*time.Minute)
		slices.SortFunc(runs, func(a, b pipelinev1.PipelineRun) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
		if c := waitPipelineRunDone(t, f, r.ns, runs[1].Name, 10*time.Minute); string(c.Status) != rerun.want {
			t.Errorf("%s: the second PipelineRun %s of %s ended %s, want Succeeded=%s", rerun.comment, runs[1].Name, rerun.sha, c.Status, rerun.want)
		}
		t.Logf("%s: PipelineRun %s", rerun.comment, runs[1].Name)
	}
	if st := r.waitStatus(t, good, time.Minute); st.State != "success" {
		t.Errorf("after /test: commit status %+v, want success", st)
	}

	runs = r.waitRuns(t, f, head, 1, time.Minute)
	t.Logf("push -> PipelineRun %s created: %s", runs[0].Name, runs[0].CreationTimestamp.Sub(pushed).Round(100*time.Millisecond))
	if got := runs[0].Labels["pipelinesascode.tekton.dev/event-type"]; got != "push" {
		t.Errorf("PipelineRun %s: event type %q, want push", runs[0].Name, got)
	}
	if st := r.waitStatus(t, head, 10*time.Minute); st.State != "success" {
		t.Errorf("the push: commit status %+v, want success", st)
	}
	if done, err := r.runsOf(f, head); err == nil && len(done) == 1 && done[0].Status.CompletionTime != nil {
		t.Logf("push -> push pipeline done: %s", done[0].Status.CompletionTime.Sub(pushed).Round(time.Second))
	}
	logs = pipelineRunLogs(t, f, r.ns, runs[0].Name, "check")
	if !strings.Contains(logs, "checking pushed "+head) {
		t.Errorf("the push check's output lacks the revision %s:\n%s", head, logs)
	}
}

// waitPipelineRunDone waits until PipelineRun name in ns has ended.
func waitPipelineRunDone(t *testing.T, f *framework.Framework, ns, name string, timeout time.Duration) *apis.Condition {
	t.Helper()
	var cond *apis.Condition
	framework.Eventually(t, timeout, "PipelineRun "+ns+"/"+name+" done", func() error {
		pr, err := f.Tekton.TektonV1().PipelineRuns(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cond = pr.Status.GetCondition(apis.ConditionSucceeded); cond == nil || cond.IsUnknown() {
			return fmt.Errorf("condition %v", cond)
		}
		return nil
	})
	return cond
}

// pipelineRunLogs returns the logs of pipeline task task of PipelineRun name.
func pipelineRunLogs(t *testing.T, f *framework.Framework, ns, name, task string) string {
	t.Helper()
	trs, err := f.Tekton.TektonV1().TaskRuns(ns).List(context.Background(), metav1.ListOptions{
		LabelSelector: "tekton.dev/pipelineRun=" + name + ",tekton.dev/pipelineTask=" + task})
	if err != nil || len(trs.Items) != 1 {
		t.Fatalf("the TaskRun of %s in %s/%s: %d (%v)", task, ns, name, len(trs.Items), err)
	}
	return framework.NewTaskRunRunner(t, f, &trs.Items[0]).Logs()
}

// TestTknPacResolve: `tkn pac resolve` (tkn-pac, built from the pinned
// Pipelines-as-Code module) turns the pull-request sample, with the
// parameters PaC would give it, into a PipelineRun that `kubectl create`
// runs as-is in a namespace holding the tasks' RBAC files.
func TestTknPacResolve(t *testing.T) {
	forgeOnly(t)
	f := framework.New(t)
	ns := f.Namespace(t)
	applyTaskRBAC(t, f, ns, renderCatalog(t, f), pacTasks...)
	out, err := run(f, f.Bin("tkn-pac"), "resolve", "-f", pacPullRequest, "-p", "revision=resolved123", "-p", "repo_owner=someone", "-p", "repo_name=demo")
	if err != nil {
		t.Fatalf("tkn-pac resolve -f %s: %v\n%s", pacPullRequest, err, out)
	}
	var pr pipelinev1.PipelineRun
	if err := yaml.Unmarshal([]byte(out), &pr); err != nil {
		t.Fatalf("tkn-pac resolve printed no PipelineRun: %v\n%s", err, out)
	}
	if strings.Contains(out, "{{") {
		t.Errorf("tkn-pac resolve left a PaC variable:\n%s", out)
	}
	file := filepath.Join(t.TempDir(), "resolved.yaml")
	if err := os.WriteFile(file, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	created, err := run(f, f.Bin("kubectl"), "create", "-n", ns, "-f", file, "-o", "name")
	if err != nil {
		t.Fatalf("kubectl create -f (the resolved PipelineRun): %v\n%s", err, created)
	}
	name := strings.TrimPrefix(strings.TrimSpace(created), "pipelinerun.tekton.dev/")
	if c := waitPipelineRunDone(t, f, ns, name, 10*time.Minute); !c.IsTrue() {
		t.Fatalf("the resolved PipelineRun %s/%s: %s: %s", ns, name, c.Reason, c.Message)
	}
	if logs := pipelineRunLogs(t, f, ns, name, "check"); !strings.Contains(logs, "checking resolved123 of someone/demo") || !strings.Contains(logs, "check passed") {
		t.Errorf("the check's output lacks the resolved parameters or its verdict:\n%s", logs)
	}
}
