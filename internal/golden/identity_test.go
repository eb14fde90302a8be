package golden

import "testing"

func TestIsPerRecord(t *testing.T) {
	for _, name := range []string{ReqID, Stage, InputHash, ModelVer, EventID, ValidAttr, LatencyMs} {
		if !IsPerRecord(name) {
			t.Errorf("IsPerRecord(%q) = false", name)
		}
	}
	for _, name := range []string{"", "service.name", "tenant_id", TraceID, "resource_usage", GenAIInputTokens} {
		if IsPerRecord(name) {
			t.Errorf("IsPerRecord(%q) = true", name)
		}
	}
}
