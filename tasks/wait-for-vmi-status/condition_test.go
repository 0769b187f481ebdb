package waitforvmi

import (
	"encoding/json"
	"strings"
	"testing"
)

const vmiJSON = `{"metadata": {"name": "vm1", "labels": {"app": "x"}},
 "status": {"phase": "Running", "nodeName": "node1", "guestOSInfo": {"id": "debian"},
  "conditions": [{"type": "Ready", "status": "True"}, {"type": "AgentConnected", "status": "True"}]}}`

func TestConditions(t *testing.T) {
	var obj map[string]any
	if err := json.Unmarshal([]byte(vmiJSON), &obj); err != nil {
		t.Fatal(err)
	}
	for text, want := range map[string]bool{
		"status.phase == Running":                           true,
		"status.phase = Running":                            true,
		"status.phase in (Failed, Unknown)":                 false,
		"status.phase notin (Failed, Unknown)":              true,
		"status.phase != Running":                           false,
		"status.conditions.1.type == AgentConnected":        true,
		"status.phase == Running, status.nodeName == node1": true,
		"status.phase == Running, status.nodeName == node2": false,
		"status.guestOSInfo.id":                             true,
		"!status.migrationState":                            true,
		"status.conditions.0.status in (True)":              true,
	} {
		c, err := ParseCondition("successCondition", text)
		if err != nil {
			t.Errorf("%q: %v", text, err)
			continue
		}
		if got := c.Matches(obj); got != want {
			t.Errorf("%q = %v, want %v", text, got, want)
		}
	}
	if c, err := ParseCondition("successCondition", ""); c != nil || err != nil {
		t.Errorf("empty condition = %v, %v", c, err)
	}
	_, err := ParseCondition("failureCondition", "status.phase in (Failed")
	if err == nil || !strings.Contains(err.Error(), "failureCondition") {
		t.Errorf("bad selector: err = %v", err)
	}
}
