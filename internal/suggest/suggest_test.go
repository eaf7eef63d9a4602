package suggest

import "testing"

func TestNearest(t *testing.T) {
	names := []string{"socket", "socket_mode", "label", "slots", "user_id"}
	cases := []struct{ s, want string }{
		{"socket_mod", "socket_mode"},
		{"lable", "label"}, // a transposition is one edit
		{"slotz", "slots"},
		{"LABEL", "label"}, // case alone
		{"usr_id", "user_id"},
		{"xyz", ""}, // nothing near
		{"workers", ""},
	}
	for _, c := range cases {
		if got := Nearest(c.s, names); got != c.want {
			t.Errorf("Nearest(%q) = %q, want %q", c.s, got, c.want)
		}
	}
}

func TestDistance(t *testing.T) {
	cases := []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"abc", "abc", 0}, {"abc", "acb", 1}, {"kitten", "sitting", 3}, {"", "abc", 3},
	}
	for _, c := range cases {
		if got := Distance(c.a, c.b); got != c.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}
