package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestStatusMetricsOff: a daemon started with `-metrics off` (as
// docs/python.md starts one) made `lastmile status` print
// "metrics    http://off/metrics", a URL that does not exist.
func TestStatusMetricsOff(t *testing.T) {
	var st apiStatus
	st.Version, st.PID = "v1", 1
	st.Config.Metrics = "off"
	var b bytes.Buffer
	if err := printStatus(&b, &st); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(b.String(), "\n") {
		if strings.HasPrefix(line, "metrics") && strings.Contains(line, "http://off") {
			t.Errorf("status with metrics off: %q; want it to say metrics are off", line)
		}
	}
}
