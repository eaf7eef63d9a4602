// Package suggest owns the one rule lastmile uses to say "did you mean" for
// a misspelt name: of a spec key, a config key, a column, a function. It is
// a leaf: it imports nothing of lastmile's, and spec, expr and ops, which
// all suggest names, share it instead of keeping copies that drift.
package suggest

import "strings"

// Nearest returns the name in names closest to s, compared without case,
// if it is close enough to be a likely typo (socket_mod for socket_mode,
// lable for label), else "". A name equal to s but for case is returned
// at once.
func Nearest(s string, names []string) string {
	best, bestD := "", 1+len(s)/3
	ls := strings.ToLower(s)
	for _, n := range names {
		if strings.EqualFold(n, s) {
			return n
		}
		if d := Distance(ls, strings.ToLower(n)); d < bestD || d == bestD && best == "" && d <= 2 {
			best, bestD = n, d
		}
	}
	return best
}

// Distance is the Levenshtein distance between a and b, counting an
// adjacent transposition as one edit; strings longer than 64 bytes are
// never near anything.
func Distance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 1 << 30
	}
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
