package e2e

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tekvirt/tekvirt/e2e/cluster"
	"github.com/tekvirt/tekvirt/e2e/framework"
)

// forgeOnly skips a scenario outside `make e2e-forge`
// (TEKVIRT_E2E_FORGE=1, after `tekvirt up --forge`).
func forgeOnly(t *testing.T) {
	t.Helper()
	if os.Getenv("TEKVIRT_E2E_FORGE") != "1" {
		t.Skip("needs the local forge and Pipelines-as-Code, over CI's budget: set TEKVIRT_E2E_FORGE=1 (make e2e-forge)")
	}
}

// forge is the local Gitea's API as the admin user of $TEKVIRT_HOME/forge/env.
type forge struct {
	cluster.ForgeEnv
	hc *http.Client
}

func newForge(t *testing.T, f *framework.Framework) *forge {
	t.Helper()
	env, err := cluster.ReadForgeEnv(filepath.Join(f.Home, cluster.ForgeEnvFile))
	if err != nil {
		t.Fatalf("the forge's env (run `tekvirt up --forge`): %v", err)
	}
	return &forge{ForgeEnv: env, hc: &http.Client{Timeout: 30 * time.Second}}
}

// errNotFound is what call returns for a 404.
var errNotFound = errors.New("not found")

// call sends body (JSON) to the API path and decodes the answer into out.
func (g *forge) call(method, path string, body, out any) error {
	var r io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return err
		}
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, g.URL+"/api/v1"+path, r)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "token "+g.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := g.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode == http.StatusNotFound {
		return fmt.Errorf("%s %s: %w", method, path, errNotFound)
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, data)
	}
	if out == nil || len(data) == 0 {
		return nil
	}
	return json.Unmarshal(data, out)
}

// repo makes a repository of the admin user with a first commit on main.
func (g *forge) repo(t *testing.T, name string) string {
	t.Helper()
	if err := g.call(http.MethodPost, "/user/repos", map[string]any{"name": name, "auto_init": true,
		"default_branch": "main", "private": true}, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.call(http.MethodDelete, "/repos/"+g.User+"/"+name, nil, nil) })
	return g.URL + "/" + g.User + "/" + name
}

// commit writes files (path -> content; "" deletes) on branch of repo, to
// newBranch if set, and returns the new commit's SHA.
func (g *forge) commit(t *testing.T, repo, branch, newBranch, message string, files map[string]string) string {
	t.Helper()
	var ops []map[string]any
	for path, content := range files {
		var existing struct {
			SHA string `json:"sha"`
		}
		err := g.call(http.MethodGet, "/repos/"+g.User+"/"+repo+"/contents/"+path+"?ref="+url.QueryEscape(branch), nil, &existing)
		if err != nil && !errors.Is(err, errNotFound) {
			t.Fatal(err)
		}
		op := map[string]any{"path": path, "content": base64.StdEncoding.EncodeToString([]byte(content)), "operation": "create"}
		switch {
		case content == "":
			op = map[string]any{"path": path, "operation": "delete", "sha": existing.SHA}
		case existing.SHA != "":
			op["operation"], op["sha"] = "update", existing.SHA
		}
		ops = append(ops, op)
	}
	req := map[string]any{"branch": branch, "message": message, "files": ops}
	if newBranch != "" {
		req["new_branch"] = newBranch
	}
	var resp struct {
		Commit struct {
			SHA string `json:"sha"`
		} `json:"commit"`
	}
	if err := g.call(http.MethodPost, "/repos/"+g.User+"/"+repo+"/contents", req, &resp); err != nil {
		t.Fatal(err)
	}
	return resp.Commit.SHA
}

// pullRequest opens a pull request of head into main and returns its number.
func (g *forge) pullRequest(t *testing.T, repo, head, title string) int {
	t.Helper()
	var pr struct {
		Number int `json:"number"`
	}
	if err := g.call(http.MethodPost, "/repos/"+g.User+"/"+repo+"/pulls", map[string]any{"head": head, "base": "main", "title": title}, &pr); err != nil {
		t.Fatal(err)
	}
	return pr.Number
}

func (g *forge) comment(t *testing.T, repo string, number int, body string) {
	t.Helper()
	if err := g.call(http.MethodPost, fmt.Sprintf("/repos/%s/%s/issues/%d/comments", g.User, repo, number), map[string]any{"body": body}, nil); err != nil {
		t.Fatal(err)
	}
}

// comments are the bodies of the comments on issue or pull request number.
func (g *forge) comments(repo string, number int) ([]string, error) {
	var cs []struct {
		Body string `json:"body"`
	}
	if err := g.call(http.MethodGet, fmt.Sprintf("/repos/%s/%s/issues/%d/comments", g.User, repo, number), nil, &cs); err != nil {
		return nil, err
	}
	var out []string
	for _, c := range cs {
		out = append(out, c.Body)
	}
	return out, nil
}

// commitStatus is one status a CI set on a commit.
type commitStatus struct {
	Context     string `json:"context"`
	State       string `json:"status"`
	Description string `json:"description"`
	TargetURL   string `json:"target_url"`
}

// statuses lists the statuses of sha, newest first.
func (g *forge) statuses(repo, sha string) ([]commitStatus, error) {
	var out []commitStatus
	err := g.call(http.MethodGet, "/repos/"+g.User+"/"+repo+"/statuses/"+sha, nil, &out)
	return out, err
}

// hook makes Gitea send repo's pushes, pull requests and comments to url,
// signed with secret.
func (g *forge) hook(t *testing.T, repo, url, secret string) {
	t.Helper()
	if err := g.call(http.MethodPost, "/repos/"+g.User+"/"+repo+"/hooks", map[string]any{
		"type": "gitea", "active": true,
		"events": []string{"push", "pull_request", "issue_comment", "pull_request_comment"},
		"config": map[string]string{"url": url, "content_type": "json", "secret": secret},
	}, nil); err != nil {
		t.Fatal(err)
	}
}
