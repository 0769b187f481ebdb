package e2e

import (
	"os"
	"testing"
)

// heavy skips a scenario outside `make e2e-hosted` (TEKVIRT_E2E_HOSTED=1),
// saying why it does not fit CI's budget.
func heavy(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("TEKVIRT_E2E_HOSTED") != "1" {
		t.Skipf("%s, over CI's budget: set TEKVIRT_E2E_HOSTED=1 (make e2e-hosted)", why)
	}
}
