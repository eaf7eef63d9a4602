package engine

import "testing"

func TestDeferLateDecision(t *testing.T) {
	tests := []struct {
		name         string
		on           bool
		read, unread int64
		want         bool
	}{
		{"too few pages to tell", false, 1, 30, false},
		{"too few pages, stays on", true, 30, 1, true},
		{"a quarter unread turns it on", false, 75, 25, true},
		{"just under a quarter leaves it off", false, 76, 24, false},
		{"between the thresholds, on stays on", true, 80, 20, true},
		{"between the thresholds, off stays off", false, 80, 20, false},
		{"under an eighth turns it off", true, 90, 10, false},
		{"an eighth exactly keeps it on", true, 280, 40, true},
		{"nothing unread", true, 1000, 0, false},
		{"everything unread", false, 0, 1000, true},
	}
	for _, tc := range tests {
		if got := deferLate(tc.on, tc.read, tc.unread); got != tc.want {
			t.Errorf("%s: deferLate(%v, %d, %d) = %v, want %v", tc.name, tc.on, tc.read, tc.unread, got, tc.want)
		}
	}
}
