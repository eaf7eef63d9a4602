package lastmile_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// mdLink is a Markdown link or image target: ](target) or ](target "title").
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// mdPathRef is a bare path to a doc page in prose, as docs/daemon.md used
// to write them: docs/NAME.md.
var mdPathRef = regexp.MustCompile(`\bdocs/[A-Za-z0-9_.-]+\.md\b`)

// TestDocLinks: every relative link in README.md and docs/*.md, and every
// docs/NAME.md they name, points to a file of the repository.
func TestDocLinks(t *testing.T) {
	pages, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, "README.md", "python/README.md")
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		text := stripCode(string(b))
		for _, m := range mdLink.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "#") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			target, _, _ = strings.Cut(target, "#")
			if _, err := os.Stat(filepath.Join(filepath.Dir(page), target)); err != nil {
				t.Errorf("%s: link to %s: no such file", page, m[1])
			}
		}
		for _, ref := range mdPathRef.FindAllString(text, -1) {
			if _, err := os.Stat(ref); err != nil {
				t.Errorf("%s: names %s: no such file", page, ref)
			}
		}
	}
}

// stripCode drops fenced code blocks, where brackets and paths are code.
func stripCode(s string) string {
	var out strings.Builder
	in := false
	for _, line := range strings.Split(s, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			in = !in
			continue
		}
		if !in {
			out.WriteString(line + "\n")
		}
	}
	return out.String()
}
