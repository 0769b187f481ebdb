package cluster

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestHasUser(t *testing.T) {
	list := `ID   Username Email                  IsActive IsAdmin 2FA
1    tekvirt  tekvirt@forge.invalid  true     true    false
`
	for _, tc := range []struct {
		name string
		want bool
	}{{"tekvirt", true}, {"Username", false}, {"tekvirt@forge.invalid", false}, {"other", false}} {
		if got := hasUser(list, tc.name); got != tc.want {
			t.Errorf("hasUser(%q) = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestReadForgeEnv(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, data string
		want       ForgeEnv
		wantErr    bool
	}{
		{"complete", "FORGE_URL=http://192.0.2.2:3000\nFORGE_USER=tekvirt\nFORGE_TOKEN=abc\nPAC_URL=http://10.96.0.9:8080\n",
			ForgeEnv{URL: "http://192.0.2.2:3000", User: "tekvirt", Token: "abc", PaCURL: "http://10.96.0.9:8080"}, false},
		{"no token", "FORGE_URL=http://192.0.2.2:3000\nPAC_URL=http://10.96.0.9:8080\n", ForgeEnv{}, true},
		{"no PaC", "FORGE_URL=http://192.0.2.2:3000\nFORGE_TOKEN=abc\n", ForgeEnv{}, true},
	} {
		path := filepath.Join(dir, tc.name)
		if err := os.WriteFile(path, []byte(tc.data), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := ReadForgeEnv(path)
		if (err != nil) != tc.wantErr || (!tc.wantErr && got != tc.want) {
			t.Errorf("%s: ReadForgeEnv = %+v, %v; want %+v (error %v)", tc.name, got, err, tc.want, tc.wantErr)
		}
	}
	written := ForgeEnv{URL: "http://192.0.2.2:3000", User: "tekvirt", Token: "t", PaCURL: "http://10.96.0.9:8080"}
	path := filepath.Join(dir, "written")
	if err := os.WriteFile(path, []byte(written.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadForgeEnv(path); err != nil || got != written {
		t.Errorf("ReadForgeEnv of what String wrote = %+v, %v; want %+v", got, err, written)
	}
	if _, err := ReadForgeEnv(filepath.Join(dir, "missing")); err == nil {
		t.Error("ReadForgeEnv of a missing file: no error")
	}
}

// TestGiteaINI: the forge listens on the node's address, needs sign-in,
// delivers webhooks only to Services, and has every secret Gitea would
// otherwise write back into the file (which would restart it on each up).
func TestGiteaINI(t *testing.T) {
	c := &Cluster{NodeIP: net.ParseIP("192.0.2.2")}
	secrets := map[string]string{"secret-key": "s1", "internal-token": "s2", "jwt-secret": "s3", "lfs-jwt-secret": "s4"}
	ini := c.giteaINI(secrets)
	for _, want := range []string{"HTTP_ADDR = 192.0.2.2\n", "HTTP_PORT = 3000\n", "ROOT_URL = http://192.0.2.2:3000/\n",
		"RUN_USER = nobody\n", "REQUIRE_SIGNIN_VIEW = true\n", "DISABLE_REGISTRATION = true\n", "INSTALL_LOCK = true\n",
		"ALLOWED_HOST_LIST = " + serviceCIDR + "\n", "SECRET_KEY = s1\n", "INTERNAL_TOKEN = s2\n", "JWT_SECRET = s3\n", "LFS_JWT_SECRET = s4\n",
		"STATIC_ROOT_PATH = " + forgePath("static") + "\n", "PATH = " + forgePath("data", "gitea.db") + "\n"} {
		if !strings.Contains(ini, want) {
			t.Errorf("gitea.ini lacks %q:\n%s", want, ini)
		}
	}
	if strings.Contains(ini, "%!") {
		t.Errorf("gitea.ini has a formatting error:\n%s", ini)
	}
}

// TestDownForgeForgetsTheForge: `up` without --forge after an `up --forge`
// leaves no forge env file behind for Status or a test to take as running.
func TestDownForgeForgetsTheForge(t *testing.T) {
	c, out := testCluster(t)
	if err := c.downForge(); err != nil || out.Len() != 0 {
		t.Fatalf("without a forge: err %v, output %q", err, out)
	}
	if err := os.MkdirAll(filepath.Dir(c.ForgeEnv()), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(c.ForgeEnv(), []byte(ForgeEnv{URL: "http://192.0.2.2:3000"}.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := c.downForge(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(c.ForgeEnv()); !os.IsNotExist(err) {
		t.Errorf("%s still there (%v)", c.ForgeEnv(), err)
	}
	if !strings.Contains(out.String(), "forge") || !strings.Contains(out.String(), "stopped") {
		t.Errorf("output does not say the forge stopped: %q", out)
	}
}
