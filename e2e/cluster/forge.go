package cluster

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The local forge: Gitea on the node's address, its admin user and the
// file that tells users and tests where it and Pipelines-as-Code are.
const (
	ForgePort  = 3000
	ForgeAdmin = "tekvirt"
	// ForgeEnvFile, under Home, holds FORGE_URL, FORGE_USER, FORGE_TOKEN
	// and PAC_URL as shell assignments.
	ForgeEnvFile = "forge/env"
)

var giteaBuild = toolBuild{
	name:     "gitea",
	module:   "code.gitea.io/gitea",
	pkgs:     []string{"gitea"},
	paths:    map[string]string{"gitea": "code.gitea.io/gitea"},
	ldflags:  func(v string) string { return "-s -w -X main.Version=" + strings.TrimPrefix(v, "v") },
	cgo:      true,
	tags:     "sqlite sqlite_unlock_notify",
	coldHint: "~9 min on 2 cores the first time",
}

// ForgeURL is the forge's base URL, which Pods, the host and the nodes reach.
func (c *Cluster) ForgeURL() string {
	return "http://" + net.JoinHostPort(c.NodeIP.String(), strconv.Itoa(ForgePort))
}

// Gitea runs as nobody, from a folder of its own outside Home (which may
// be a private home directory): bin/ and static/ (its templates and
// options, from the module) and app.ini are root's and readable; data/
// (database, repositories, git's HOME) is Gitea's.
var (
	forgeRoot = filepath.Join(NodeRoot, "forge")
	forgeUser = &syscall.Credential{Uid: 65534, Gid: 65534}
)

func forgePath(parts ...string) string {
	return filepath.Join(append([]string{forgeRoot}, parts...)...)
}

// giteaProcess is the forge's web server.
func (c *Cluster) giteaProcess() *process {
	addr := net.JoinHostPort(c.NodeIP.String(), strconv.Itoa(ForgePort))
	return &process{
		name: "gitea", binary: forgePath("bin", "gitea"),
		args:    []string{"web", "--config", forgePath("app.ini"), "--work-path", forgePath("data")},
		env:     []string{"HOME=" + forgePath("data", "home"), "USER=nobody"},
		configs: []string{forgePath("app.ini")},
		user:    forgeUser,
		ports:   []string{addr}, ready: httpReady(nil, c.ForgeURL()+"/api/healthz"), readyTimeout: 2 * time.Minute,
	}
}

// giteaINI is Gitea's configuration: sqlite, no SSH, no mail, no
// registration, nothing fetched from the internet, webhooks only to
// Services (where Pipelines-as-Code listens). Secrets are given so that
// Gitea never rewrites the file (which would restart it on every up).
func (c *Cluster) giteaINI(secrets map[string]string) string {
	d := forgePath("data")
	return fmt.Sprintf(`APP_NAME = tekvirt forge
RUN_MODE = prod
RUN_USER = nobody
WORK_PATH = %[1]s

[server]
PROTOCOL = http
HTTP_ADDR = %[2]s
HTTP_PORT = %[3]d
ROOT_URL = %[4]s/
DISABLE_SSH = true
START_SSH_SERVER = false
OFFLINE_MODE = true
LFS_START_SERVER = false
LFS_JWT_SECRET = %[10]s
STATIC_ROOT_PATH = %[5]s
APP_DATA_PATH = %[1]s/data

[database]
DB_TYPE = sqlite3
PATH = %[1]s/gitea.db
SQLITE_JOURNAL_MODE = WAL

[repository]
ROOT = %[1]s/repositories
DEFAULT_BRANCH = main

[security]
INSTALL_LOCK = true
SECRET_KEY = %[6]s
INTERNAL_TOKEN = %[7]s

[oauth2]
ENABLED = false
JWT_SECRET = %[9]s

[service]
DISABLE_REGISTRATION = true
REQUIRE_SIGNIN_VIEW = true
DEFAULT_KEEP_EMAIL_PRIVATE = true

[webhook]
ALLOWED_HOST_LIST = %[8]s
DELIVER_TIMEOUT = 10

[mailer]
ENABLED = false

[actions]
ENABLED = false

[packages]
ENABLED = false

[log]
MODE = console
LEVEL = Info
`, d, c.NodeIP, ForgePort, c.ForgeURL(), forgePath("static"), secrets["secret-key"], secrets["internal-token"], serviceCIDR,
		secrets["jwt-secret"], secrets["lfs-jwt-secret"])
}

// forgeSecrets reads Gitea's secrets from Home, making them the first time.
func (c *Cluster) forgeSecrets() (map[string]string, error) {
	if err := os.MkdirAll(c.path("data", "forge"), 0o700); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, name := range []string{"secret-key", "internal-token", "jwt-secret", "lfs-jwt-secret"} {
		path := c.path("data", "forge", name)
		data, err := os.ReadFile(path)
		if errors.Is(err, os.ErrNotExist) {
			b := make([]byte, 32)
			if _, err := rand.Read(b); err != nil {
				return nil, err
			}
			data = []byte(hex.EncodeToString(b))
			if strings.HasSuffix(name, "jwt-secret") { // Gitea's format for these
				data = []byte(base64.RawURLEncoding.EncodeToString(b))
			}
			if err := os.WriteFile(path, data, 0o600); err != nil {
				return nil, err
			}
		} else if err != nil {
			return nil, err
		}
		out[name] = strings.TrimSpace(string(data))
	}
	return out, nil
}

// upForge builds and starts Gitea, makes its admin user and a token,
// installs Pipelines-as-Code and writes ForgeEnvFile.
func (c *Cluster) upForge(ctx context.Context) error {
	if _, err := exec.LookPath("git"); err != nil {
		return errors.New("the forge needs git: apt-get install git")
	}
	giteaDir, err := c.buildTool(ctx, giteaBuild)
	if err != nil {
		return err
	}
	pacDir, err := c.buildTool(ctx, pacBuild)
	if err != nil {
		return err
	}
	secrets, err := c.forgeSecrets()
	if err != nil {
		return fmt.Errorf("the forge's secrets: %w", err)
	}
	if err := c.layOutForge(giteaDir, c.giteaINI(secrets)); err != nil {
		return fmt.Errorf("laying out %s: %w", forgeRoot, err)
	}
	gitea := c.giteaProcess()
	if err := c.ensure(ctx, gitea); err != nil {
		return err
	}
	token, err := c.forgeToken(ctx, gitea)
	if err != nil {
		return err
	}
	pacURL, err := c.installPaC(ctx, pacDir)
	if err != nil {
		return err
	}
	link := filepath.Join(c.BinDir(), "tkn-pac")
	_ = os.Remove(link)
	if err := os.Symlink(filepath.Join(pacDir, "tkn-pac"), link); err != nil {
		return err
	}
	env := ForgeEnv{URL: c.ForgeURL(), User: ForgeAdmin, Token: token, PaCURL: pacURL}.String()
	if err := os.MkdirAll(filepath.Dir(c.ForgeEnv()), 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(c.ForgeEnv(), []byte(env), 0o600); err != nil {
		return err
	}
	c.progress("%-24s %s (admin %s; %s)", "forge", c.ForgeURL(), ForgeAdmin, c.ForgeEnv())
	return nil
}

// downForge stops a forge an earlier `up --forge` started, as `up` without
// --forge asks, and removes ForgeEnvFile so that nothing takes it for
// running. Its data stays for the next `up --forge`; Pipelines-as-Code
// stays installed and idle.
func (c *Cluster) downForge() error {
	if _, err := os.Stat(c.ForgeEnv()); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err := c.stop(c.giteaProcess()); err != nil {
		return err
	}
	_ = os.Remove(filepath.Join(c.BinDir(), "tkn-pac"))
	if err := os.Remove(c.ForgeEnv()); err != nil {
		return err
	}
	c.progress("%-24s stopped (up without --forge)", "forge")
	return nil
}

// ForgeEnv is the file `up --forge` writes the forge's addresses and token to.
func (c *Cluster) ForgeEnv() string { return filepath.Join(c.Home, ForgeEnvFile) }

// forgeToken returns an API token of the forge's admin user: the one the
// env file holds while the forge accepts it, else a new one (making the
// user first if it does not exist).
func (c *Cluster) forgeToken(ctx context.Context, gitea *process) (string, error) {
	if env, err := ReadForgeEnv(c.ForgeEnv()); err == nil && env.Token != "" && c.forgeAccepts(ctx, env.Token) {
		return env.Token, nil
	}
	users, err := c.giteaAdmin(ctx, gitea, "user", "list", "--admin")
	if err != nil {
		return "", err
	}
	if !hasUser(users, ForgeAdmin) {
		if _, err := c.giteaAdmin(ctx, gitea, "user", "create", "--admin", "--username", ForgeAdmin,
			"--email", ForgeAdmin+"@forge.invalid", "--random-password", "--must-change-password=false"); err != nil {
			return "", err
		}
	}
	out, err := c.giteaAdmin(ctx, gitea, "user", "generate-access-token", "--username", ForgeAdmin,
		"--token-name", "up-"+strconv.FormatInt(time.Now().Unix(), 10), "--scopes", "all", "--raw")
	if err != nil {
		return "", err
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	token := strings.TrimSpace(lines[len(lines)-1])
	if !c.forgeAccepts(ctx, token) {
		return "", fmt.Errorf("the forge does not accept the token gitea admin made for %s", ForgeAdmin)
	}
	return token, nil
}

// hasUser reports whether the table `gitea admin user list` printed has a
// row (an ID first) for name (the second column).
func hasUser(list, name string) bool {
	for _, line := range strings.Split(list, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		if _, err := strconv.Atoi(f[0]); err == nil && f[1] == name {
			return true
		}
	}
	return false
}

// ForgeEnv is what ForgeEnvFile says.
type ForgeEnv struct{ URL, User, Token, PaCURL string }

// String is e as the env file's shell assignments.
func (e ForgeEnv) String() string {
	return fmt.Sprintf("FORGE_URL=%s\nFORGE_USER=%s\nFORGE_TOKEN=%s\nPAC_URL=%s\n", e.URL, e.User, e.Token, e.PaCURL)
}

// ReadForgeEnv reads the env file `up --forge` wrote.
func ReadForgeEnv(path string) (ForgeEnv, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return ForgeEnv{}, err
	}
	var e ForgeEnv
	for _, line := range strings.Split(string(data), "\n") {
		k, v, _ := strings.Cut(line, "=")
		switch k {
		case "FORGE_URL":
			e.URL = v
		case "FORGE_USER":
			e.User = v
		case "FORGE_TOKEN":
			e.Token = v
		case "PAC_URL":
			e.PaCURL = v
		}
	}
	if e.URL == "" || e.Token == "" || e.PaCURL == "" {
		return e, fmt.Errorf("%s lacks FORGE_URL, FORGE_TOKEN or PAC_URL", path)
	}
	return e, nil
}

// giteaAdmin runs `gitea admin args...` against the running forge.
func (c *Cluster) giteaAdmin(ctx context.Context, gitea *process, args ...string) (string, error) {
	full := append([]string{"admin"}, args...)
	full = append(full, "--config", forgePath("app.ini"), "--work-path", forgePath("data"))
	cmd := exec.CommandContext(ctx, gitea.binary, full...)
	cmd.Dir = forgePath("data")
	cmd.Env = append(os.Environ(), gitea.env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: gitea.user}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("gitea admin %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// forgeAccepts reports whether the forge takes token as its admin's.
func (c *Cluster) forgeAccepts(ctx context.Context, token string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.ForgeURL()+"/api/v1/user", nil)
	if err != nil {
		return false
	}
	req.Header.Set("Authorization", "token "+token)
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// layOutForge puts Gitea's binary (from dir), static files (from its
// module) and ini into forgeRoot, and makes data/ Gitea's.
func (c *Cluster) layOutForge(dir, ini string) error {
	m, err := c.toolModule(giteaBuild)
	if err != nil {
		return err
	}
	for _, d := range []string{"bin", "static"} {
		if err := os.MkdirAll(forgePath(d), 0o755); err != nil {
			return err
		}
	}
	if err := os.Chmod(forgeRoot, 0o755); err != nil {
		return err
	}
	if err := copyIfChanged(filepath.Join(dir, "gitea"), forgePath("bin", "gitea")); err != nil {
		return err
	}
	if err := os.Chmod(forgePath("bin", "gitea"), 0o755); err != nil {
		return err
	}
	if err := copyStatic(m); err != nil {
		return err
	}
	if err := writeIfChanged(forgePath("app.ini"), []byte(ini), 0o640); err != nil {
		return err
	}
	if err := os.Chown(forgePath("app.ini"), 0, int(forgeUser.Gid)); err != nil {
		return err
	}
	for _, d := range []string{"data", "data/home"} {
		if err := os.MkdirAll(forgePath(d), 0o700); err != nil {
			return err
		}
		if err := os.Chown(forgePath(d), int(forgeUser.Uid), int(forgeUser.Gid)); err != nil {
			return err
		}
	}
	return nil
}

// copyStatic copies Gitea's templates, options and public files from its
// module into static/ unless a marker says they are m's version already.
func copyStatic(m toolModule) error {
	marker := forgePath("static", ".version")
	if old, _ := os.ReadFile(marker); string(old) == m.version {
		return nil
	}
	for _, sub := range []string{"templates", "options", "public"} {
		_ = os.RemoveAll(forgePath("static", sub))
		if out, err := exec.Command("cp", "-R", filepath.Join(m.dir, sub), forgePath("static", sub)).CombinedOutput(); err != nil {
			return fmt.Errorf("copying Gitea's %s: %w: %s", sub, err, out)
		}
		if out, err := exec.Command("chmod", "-R", "u+w,a+rX", forgePath("static", sub)).CombinedOutput(); err != nil {
			return fmt.Errorf("chmod %s: %w: %s", sub, err, out)
		}
	}
	return os.WriteFile(marker, []byte(m.version), 0o644)
}
