package e2e

import (
	"os"
	"testing"
)

// heavy skips a scenario outside `make e2e-hosted` (TEKVIRT_E2E_HOSTED=1),
// saying why it does not fit CI's budget.
func heavy(t *testing.T, why string) {
	t.Helper()
	only(t, "TEKVIRT_E2E_HOSTED", "make e2e-hosted", why)
}

// migrationHeavy skips a scenario outside `make e2e-migration`
// (TEKVIRT_E2E_MIGRATION=1), saying why it does not fit CI's budget.
func migrationHeavy(t *testing.T, why string) {
	t.Helper()
	only(t, "TEKVIRT_E2E_MIGRATION", "make e2e-migration", why)
}

func only(t *testing.T, env, target, why string) {
	t.Helper()
	if os.Getenv(env) != "1" {
		t.Skipf("%s, over CI's budget: set %s=1 (%s)", why, env, target)
	}
}

// conformanceRun skips a scenario outside `make conformance` and `make
// conformance-hosted` (TEKVIRT_E2E_CONFORMANCE=1): Kubernetes' own tests
// take hours here.
func conformanceRun(t *testing.T) {
	t.Helper()
	only(t, "TEKVIRT_E2E_CONFORMANCE", "make conformance, make conformance-hosted", "Kubernetes' conformance tests")
}
